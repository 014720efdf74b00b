"""The glossary names every declared quantity, so one name keeps one meaning across systems."""
import pathlib
import re

import tisim

GLOSSARY = (pathlib.Path(__file__).parent.parent / "docs" / "glossary.md").read_text()


def test_every_declared_quantity_is_in_the_glossary():
    """Each parameter, state, action and scratch name of every system appears in docs/glossary.md as `name`."""
    listed = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", GLOSSARY))
    missing = []
    for name in tisim.systems.__all__:
        system = getattr(tisim.systems, name)
        for quantity in system.PARAMS + system.STATE + system.ACTION + system.SCRATCH:
            if quantity.name not in listed:
                missing.append(f"{name}.{quantity.name}")
    assert not missing, f"add to docs/glossary.md: {missing}"


def test_declarations_are_complete():
    """Every declared quantity has a unit, a meaning and valid bounds containing its default."""
    for name in tisim.systems.__all__:
        system = getattr(tisim.systems, name)
        for quantity in system.PARAMS + system.STATE + system.ACTION:
            assert quantity.unit and quantity.meaning, f"{name}.{quantity.name}"
            assert quantity.interval.contains(quantity.default), f"{name}.{quantity.name} default outside bounds"
