"""The generated parts of the reference pages, made from the systems' declarations when the site is built.

mkdocs loads this file as a hook (mkdocs.yml `hooks:`). A page holds a marker comment where generated Markdown goes:

    <!-- generated: systems catalogue -->   every system in tisim.systems: its summary and its quantity tables
    <!-- generated: quantity names -->      one row per declared name: unit(s), meaning(s), which systems

so the catalogue and the glossary's name table are always those of the code being documented. The tests import
this file too (tests/test_glossary.py).
"""
import collections
import os
import re

MARKERS = {
    "reference/systems.md": "<!-- generated: systems catalogue -->",
    "reference/glossary.md": "<!-- generated: quantity names -->",
}
# systems whose units, masses and forces beyond the state are set out on a page of their own (the link's anchor must
# exist: the build is strict)
CONVENTIONS = {"MPM": "../concepts/conventions.md#mpm", "MassSpring": "../concepts/conventions.md#mass-spring"}
GROUPS = (("PARAMS", "Parameters"), ("STATE", "State"), ("ACTION", "Actions"), ("SCRATCH", "Scratch"))
KINDS = {"PARAMS": "parameter", "STATE": "state", "ACTION": "action", "SCRATCH": "scratch"}


def systems():
    """{name: class} of every system tisim.systems exports, in its __all__ order."""
    os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")
    import tisim.systems

    return {name: getattr(tisim.systems, name) for name in tisim.systems.__all__}


def declarations():
    """(system name, group, quantity) for every declared parameter, state, action and scratch entry."""
    return [(name, group, q) for name, system in systems().items() for group, _ in GROUPS
            for q in getattr(system, group, ())]


def summary(system):
    """The first paragraph of a class's docstring, on one line."""
    doc = (system.__doc__ or "").strip()
    return " ".join(re.split(r"\n\s*\n", doc)[0].split())


def cell(text):
    """Text for one Markdown table cell: pipes escaped, on one line."""
    return " ".join(str(text).split()).replace("|", "\\|")


def shape(q):
    """"scalar", or the shape as Python writes a tuple: (n_springs,), (n_particles, dim)."""
    if not q.shape:
        return "scalar"
    return "(" + ", ".join(str(d) for d in q.shape) + ("," if len(q.shape) == 1 else "") + ")"


def default(value):
    return f"{value:g}" if isinstance(value, float) else str(value)


def table(group, quantities):
    if group == "SCRATCH":
        lines = ["| name | unit | shape | kept | meaning |", "|---|---|---|---|---|"]
        for q in quantities:
            kept = "every step" if q.keep else "recomputed"
            lines.append(f"| `{q.name}` | {cell(q.unit)} | {shape(q)} | {kept} | {cell(q.meaning)} |")
        return lines
    lines = ["| name | unit | shape | default | bounds | meaning |", "|---|---|---|---|---|---|"]
    for q in quantities:
        lines.append(f"| `{q.name}` | {cell(q.unit)} | {shape(q)} | {default(q.default)} | {cell(q.interval)} "
                     f"| {cell(q.meaning)} |")
    return lines


def systems_catalogue():
    """Markdown: for each system, its docstring's first paragraph and its tables of declared quantities."""
    lines = []
    for name, system in systems().items():
        api = f"[`tisim.systems.{name}`](api.md#tisim.systems.{name})"  # strict build: the anchor must exist
        lines += [f"## {name}", "", f"{api}: {summary(system)}", ""]
        if name in CONVENTIONS:
            lines += [f"Its units (2D included), each point's mass, the forces the state does not hold and their "
                      f"readouts: [conventions]({CONVENTIONS[name]}).", ""]
        for group, title in GROUPS:
            quantities = getattr(system, group, ())
            if quantities:
                lines += [f"**{title}**", ""] + table(group, quantities) + [""]
    return "\n".join(lines)


def names():
    """{name: {"kinds": [...], "units": {unit: [systems]}, "meanings": {meaning: [systems]}}} over every system."""
    out = collections.OrderedDict()
    for system, group, q in sorted(declarations(), key=lambda d: (d[2].name.lower(), d[2].name)):
        entry = out.setdefault(q.name, {"kinds": [], "units": {}, "meanings": {}})
        if KINDS[group] not in entry["kinds"]:
            entry["kinds"].append(KINDS[group])
        for key, value in (("units", q.unit), ("meanings", q.meaning)):
            if system not in entry[key].setdefault(value, []):
                entry[key][value].append(system)
    return out


def by_system(values, several):
    """"meaning" when one value is shared by all; "A, B: meaning; C: other" when they differ."""
    if not several:
        return cell(next(iter(values)))
    return "; ".join(f"{', '.join(systems)}: {cell(value)}" for value, systems in values.items())


def quantity_names():
    """Markdown: one table row per declared name, its unit(s), meaning(s) and the systems that declare it."""
    lines = ["| name | kind | unit | meaning | systems |", "|---|---|---|---|---|"]
    for name, entry in names().items():
        systems = sorted({s for listed in entry["meanings"].values() for s in listed}, key=str.lower)
        lines.append(f"| `{name}` | {', '.join(entry['kinds'])} | {by_system(entry['units'], len(entry['units']) > 1)}"
                     f" | {by_system(entry['meanings'], len(entry['meanings']) > 1)} | {', '.join(systems)} |")
    return "\n".join(lines)


GENERATORS = {"reference/systems.md": systems_catalogue, "reference/glossary.md": quantity_names}


def expand(path, markdown):
    """A page's Markdown with its marker replaced by the generated Markdown; the page as it is when it has none.
    A page that should have a marker and lacks it is an error, so the generated part cannot silently vanish."""
    if path not in MARKERS:
        return markdown
    if markdown.count(MARKERS[path]) != 1:
        raise ValueError(f"docs/{path} must hold the line {MARKERS[path]} exactly once")
    return markdown.replace(MARKERS[path], GENERATORS[path]())


def on_page_markdown(markdown, page, config, files):
    """mkdocs hook: fill in the generated parts of the reference pages."""
    from mkdocs.exceptions import PluginError

    try:
        return expand(page.file.src_uri, markdown)
    except ValueError as error:
        raise PluginError(str(error)) from None
