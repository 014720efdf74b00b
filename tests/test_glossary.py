"""The glossary (docs/reference/glossary.md): one name keeps one unit and one kind of meaning across systems, every
declared name is listed with its meaning, and the hand-written terms say each thing once, in the project's words."""
import importlib.util
import pathlib
import re
import warnings

import numpy as np
import pytest

import tisim

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reference" / "glossary.md"
GLOSSARY = PAGE.read_text()


def load_generator():
    """docs/gen/reference.py, the hook that generates the reference pages when the site is built."""
    spec = importlib.util.spec_from_file_location("docs_reference_generator", ROOT / "docs" / "gen" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATOR = load_generator()

# Names declared with more than one unit, on purpose: {name: ({units}, why)}. The glossary page explains each.
SEVERAL_UNITS = {
    "x": ({"m", "-"}, "a position along a line, but the state of the linear systems, which has no unit"),
    "theta": ({"rad", "-"}, "an angle as a state (pendulum, cart-pole), the linear systems' dimensionless drive as a "
                            "parameter"),
    "drag": ({"N s/m", "1/s"}, "MassSpring's force per velocity on each particle; a rate for rigid bodies and "
                               "material points, whose masses vary"),
}


def section(markdown, title):
    """The text of one '## title' section of a page."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", markdown, re.S | re.M)
    assert match, f"docs/reference/glossary.md has no section '## {title}'"
    return match.group(1)


def table_rows(markdown):
    """The cells of each data row of the Markdown tables in ``markdown`` (header and rule rows left out)."""
    rows = [line.strip() for line in markdown.splitlines() if line.strip().startswith("|")]
    cells = [[c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]
    return [c for c in cells if not all(set(x) <= set("-: ") for x in c) and c[0] not in ("name", "term")]


def terms():
    """{term: definition} of the hand-written table; "horizon, T" defines both words. Raises on a term twice."""
    defined = {}
    for term, meaning in table_rows(section(GLOSSARY, "Terms")):
        for word in term.split(", "):
            assert word not in defined, f"the glossary defines '{word}' twice"
            defined[word] = meaning
    return defined


def test_declarations_are_complete():
    """Every declared quantity has a unit, a meaning and valid bounds containing its default."""
    for name in tisim.systems.__all__:
        system = getattr(tisim.systems, name)
        for quantity in system.PARAMS + system.STATE + system.ACTION:
            assert quantity.unit and quantity.meaning, f"{name}.{quantity.name}"
            assert quantity.interval.contains(quantity.default), f"{name}.{quantity.name} default outside bounds"


def test_every_declared_name_has_a_unit_and_a_meaning():
    """Parameters, states, actions and scratch alike: the glossary's row of a name is made from these."""
    missing = [f"{system}.{q.name}" for system, _, q in GENERATOR.declarations()
               if not q.unit.strip() or not q.meaning.strip()]
    assert not missing, f"declare a unit and a meaning for {missing}"


def test_one_name_has_one_unit_across_systems():
    """A name keeps its unit in every system that declares it, but for the exceptions listed above (each must still
    be needed, and must be explained on the glossary page)."""
    units = {}
    for system, _, q in GENERATOR.declarations():
        units.setdefault(q.name, {}).setdefault(q.unit, []).append(system)
    several = {name: set(by_unit) for name, by_unit in units.items() if len(by_unit) > 1}
    unexpected = {name: units[name] for name in several if name not in SEVERAL_UNITS}
    assert not unexpected, f"one name, several units (rename one, or list it in SEVERAL_UNITS): {unexpected}"
    for name, (expected, _) in SEVERAL_UNITS.items():
        assert several.get(name) == expected, f"SEVERAL_UNITS[{name!r}] is {expected}, the declarations give " \
                                              f"{set(units.get(name, {}))}"
        assert f"`{name}`" in section(GLOSSARY, "Quantity names"), f"explain {name}'s units on the glossary page"


def test_generated_table_lists_every_declared_name_once():
    """The page's marker becomes one row per declared name, with its units and the systems that declare it."""
    page = GENERATOR.expand("reference/glossary.md", GLOSSARY)
    assert GENERATOR.MARKERS["reference/glossary.md"] not in page
    rows = table_rows(section(page, "Quantity names"))
    listed = [row[0].strip("`") for row in rows]
    assert len(listed) == len(set(listed)), "a name has two rows"
    declared, kinds = {}, {}
    for system, group, q in GENERATOR.declarations():
        declared.setdefault(q.name, set()).add(system)
        kinds.setdefault(q.name, set()).add(GENERATOR.KINDS[group])
    assert set(listed) == set(declared)
    for name, kind, unit, meaning, systems in rows:
        name = name.strip("`")
        assert set(systems.split(", ")) == declared[name], name
        assert set(kind.split(", ")) == kinds[name], name
        assert unit and meaning, name


def test_the_page_needs_its_marker():
    """A glossary without the marker fails the build instead of losing its name table."""
    with pytest.raises(ValueError, match="generated: quantity names"):
        GENERATOR.expand("reference/glossary.md", GLOSSARY.replace(GENERATOR.MARKERS["reference/glossary.md"], ""))


def test_terms_are_defined_once_and_in_the_project_words():
    """No term twice (terms() raises), and the words that were once overloaded have their one meaning."""
    defined = terms()
    required = {  # term: what its definition must say
        "adjoint": "lambda_t = dL/dx_t",
        "forward pass": "rollout",
        "forward mode": "Forward-mode differentiation",
        "checkpoint": "Only gradient checkpointing",
        "snapshot": "resume file",
        "model": "Only the compiled kernel host",
        "theta": "the parameter vector",
        "reverse": "hand-written reverse kernel",
    }
    for term, phrase in required.items():
        assert term in defined, f"the glossary must define '{term}'"
        assert phrase in defined[term], f"'{term}' must say '{phrase}'"
    # the old senses stay out: an optimizer's resume file is no checkpoint, a phase's reverse kernel no adjoint
    assert "snapshot" in defined["checkpoint"] or "checkpoint" in defined["snapshot"]
    assert "resume" not in defined["checkpoint"]
    assert "reverse" not in defined["adjoint"]


def test_a_term_that_is_also_a_quantity_name_says_which_is_which():
    """theta, x, u, a, B are words of the equations and also quantities some systems declare: the definition names
    the quantity as such, so a reader never mistakes one for the other."""
    declared = {q.name for _, _, q in GENERATOR.declarations()}
    for term, meaning in terms().items():
        if term in declared:
            assert f"quantity named `{term}`" in meaning, f"'{term}' is also a declared quantity: say which is which"


def test_the_named_gradient_mechanisms_are_the_ones_sim_gradient_takes():
    """Each mechanism the glossary names runs under that name, without a deprecation warning."""
    mechanisms = re.findall(r'"(\w+)"', terms()["gradient mechanism"])
    assert len(mechanisms) == 4, mechanisms
    sim = tisim.systems.Pendulum(horizon=100)
    sim.set_initial_state(theta=0.3)
    loss = tisim.losses.TerminalTarget({"theta": 0.0})
    reference = None
    for method in mechanisms:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            g = sim.gradient(loss, method=method)
        value = np.concatenate([np.ravel(g.params[name]) for name in sorted(g.params)])
        reference = value if reference is None else reference
        assert np.all(np.isfinite(value)), method
        # the continuous adjoint differs from the discrete gradient by O(dt): a few per cent here
        np.testing.assert_allclose(value, reference, rtol=0.05, atol=1e-3 * np.abs(reference).max(), err_msg=method)
