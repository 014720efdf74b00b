"""What a fresh install needs: every package tisim imports is declared, and tisim runs with a read-only home and no
network."""
import ast
import configparser
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def imported_packages():
    """Top-level names of the third-party packages that tisim/ imports anywhere (at import or lazily)."""
    names = set()
    for path in (ROOT / "tisim").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"tisim"}


def declared_packages():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = config["options"]["install_requires"].split()
    lines += [line for extra in config["options.extras_require"].values() for line in extra.split()]
    return {line.split("=")[0].split("<")[0].split(">")[0].strip().lower() for line in lines if line.strip()}


def test_every_imported_package_is_declared():
    """setup.cfg names every third-party package tisim imports (rich, for the progress bars, among them)."""
    missing = {name for name in imported_packages() if name.lower() not in declared_packages()}
    assert not missing, f"tisim imports {sorted(missing)}, which setup.cfg does not declare"
    assert {"taichi", "numpy", "rich"} <= imported_packages()  # the scan sees what it should


RUN = textwrap.dedent("""
    import numpy as np
    import tisim
    from tisim import optim, plots, viz
    from tisim.systems import MassSpring
    from tisim.systems.mass_spring import mean_x_weights
    sim = MassSpring(horizon=20, robot="worm")
    g = sim.gradient(tisim.losses.TerminalSum(mean_x_weights(sim)))
    assert np.isfinite(g.value) and np.all(np.isfinite(g.params["k"]))
    frames = viz.frames(sim, sim.rollout(), every=10)
    viz.save_gif(sys.argv[1] + "/walk.gif", frames)
    result = optim.minimize(lambda v: (float(v["p"] @ v["p"]), {"p": 2 * v["p"]}), {"p": np.ones(2)},
                            iterations=3, checkpoint=sys.argv[1] + "/run.npz", progress=True)
    plots.plot_history(result.history, sys.argv[1] + "/history.png")
    print("ran")
""")


def test_runs_with_a_read_only_home_and_no_network(tmp_path):
    """In a process whose HOME cannot be written (it cannot even be created) and that has no network (its own
    network namespace, as root), tisim compiles, differentiates, draws, checkpoints and exits cleanly: Taichi's cache
    falls back to a temporary folder, and nothing reaches for the network (TI_SKIP_VERSION_CHECK is not set here)."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-n", "true"]).returncode != 0:
        pytest.skip("unshare -n is not available here (it needs root and network namespaces)")
    script = tmp_path / "run.py"
    script.write_text("import sys\n" + RUN)
    env = {k: v for k, v in os.environ.items()
           if k not in ("TI_OFFLINE_CACHE_FILE_PATH", "TI_SKIP_VERSION_CHECK", "MPLCONFIGDIR", "XDG_CACHE_HOME")}
    env.update(HOME="/dev/null/home", MPLBACKEND="Agg", PYTHONPATH=str(ROOT))
    done = subprocess.run(["unshare", "-n", sys.executable, str(script), str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and "ran" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    assert (tmp_path / "walk.gif").stat().st_size > 0 and (tmp_path / "history.png").stat().st_size > 0


def tisim_imports(keep_unknown=False):
    """{module: the tisim modules it imports anywhere in its source, at import or inside a function}; keep_unknown:
    names that are no module file too (a flat name, a class imported from a package)."""
    graph = {}
    for path in (ROOT / "tisim").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name.startswith("tisim"))
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{path}: tisim imports its own modules by absolute name"
                if node.module.startswith("tisim"):
                    # `from tisim.core import engine` imports tisim.core.engine; `from tisim.core.engine import X`,
                    # tisim.core.engine
                    found.update(f"{node.module}.{alias.name}" for alias in node.names)
                    found.add(node.module)
        graph[module] = found
    return {m: {d for d in deps if (keep_unknown or d in graph) and d != m} for m, deps in graph.items()}


def test_imports_point_one_way():
    """No import circle among tisim's modules; an import inside a function counts too. Only a package and its own
    modules may import each other (its __init__ gathers them)."""
    graph = tisim_imports()
    assert {"tisim.core.engine", "tisim.autodiff.checkpointing", "tisim.core.runtime",
            "tisim.core.launch"} <= set(graph)
    assert "tisim.core.engine" in graph["tisim.autodiff.checkpointing"]  # the scan sees what it should

    def cycle_from(start):
        stack, on_path = [(start, iter(sorted(graph[start])))], [start]
        while stack:
            module, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                on_path.pop()
            elif module.startswith(child + "."):  # a module may import its own package (tisim, tisim.systems)
                continue
            elif child in on_path:
                return on_path[on_path.index(child):] + [child]
            else:
                stack.append((child, iter(sorted(graph[child]))))
                on_path.append(child)
        return None

    cycles = [c for c in map(cycle_from, sorted(graph)) if c]
    assert not cycles, f"import circles: {[' -> '.join(c) for c in cycles]}"


# tisim's layers, lowest first: a module may import from its own layer and the layers before it, never after
LAYERS = ("core", "autodiff", "physics", "learn", "systems", "optim", "viz", "envs")


def layer_of(module):
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def upward_imports(graph):
    """(module, what it imports) pairs where a module imports from a layer above its own."""
    return sorted((m, d) for m, deps in graph.items() for d in deps
                  if layer_of(m) is not None and layer_of(d) is not None and layer_of(d) > layer_of(m))


def test_imports_point_down_the_layers():
    """Every module of a layer folder imports only from its own layer and the ones below (core < autodiff < physics
    < learn < systems < optim < viz < envs), and never through tisim's flat names (tisim.tasks, tisim.plots, ...)."""
    import tisim

    graph = tisim_imports()
    assert set(LAYERS) == {p.name for p in (ROOT / "tisim").iterdir() if (p / "__init__.py").exists()}
    assert not upward_imports(graph), upward_imports(graph)
    flat = [(m, d) for m, deps in tisim_imports(keep_unknown=True).items() for d in deps
            if d.startswith("tisim.") and d.split(".")[1] in tisim.FLAT_NAMES and m != "tisim"]
    assert not flat, f"modules inside tisim/ import a flat name instead of its module: {flat}"
    # the check itself: a core module that imported a system would be found
    assert upward_imports({"tisim.core.engine": {"tisim.systems.cartpole"}, "tisim.systems.cartpole": set()}) == [
        ("tisim.core.engine", "tisim.systems.cartpole")]


def test_flat_names_are_the_layered_modules():
    """tisim.tasks, tisim.plots, ... are the modules inside the layers, as attributes and to import statements."""
    import importlib

    import tisim

    for flat, real in tisim.FLAT_NAMES.items():
        if flat == "pytorch" and importlib.util.find_spec("torch") is None:
            continue
        module = importlib.import_module(f"tisim.{flat}")
        assert module is importlib.import_module(real) is getattr(tisim, flat)
        assert module.__spec__.name == real
    with pytest.raises(AttributeError, match="no attribute 'not_a_module'"):
        tisim.not_a_module  # noqa: B018


def private_reaches(source):
    """Lines where code reads a private attribute of a simulator (sim._x, self.sim._x, self._sim._x, sim.__dict__)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and \
                not (node.attr.startswith("__") and node.attr != "__dict__"):
            owner = node.value
            name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            if name in ("sim", "_sim"):
                found.append((node.lineno, f"line {node.lineno}: {ast.unparse(node)}"))
    return [text for _, text in sorted(found)]


def test_only_the_engine_and_the_protocol_reach_into_a_simulator():
    """The mechanisms and loops use a simulator through tisim/core/protocol.py; only the engine and that module read a
    simulator's private attributes, so the engine can change behind one class."""
    reaches = {path.name: private_reaches(path.read_text()) for path in (ROOT / "tisim").rglob("*.py")
               if path.name not in ("engine.py", "protocol.py")}
    assert not {k: v for k, v in reaches.items() if v}
    assert private_reaches("sim._launch(k)\nself.sim._host\nself._sim._u\nsim.__dict__\nsim.params\n") == [
        "line 1: sim._launch", "line 2: self.sim._host", "line 3: self._sim._u", "line 4: sim.__dict__"]


@pytest.mark.parametrize("threads", ["0", str(len(os.sched_getaffinity(0)) + 1)])
def test_the_peers_benchmark_refuses_a_thread_count_it_cannot_pin(threads):
    """benchmarks/peers.py --threads takes 1 to the process's cores, and says so before any package loads."""
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "peers.py"), "--threads", threads],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"--threads: an integer from 1 to {len(os.sched_getaffinity(0))}" in done.stderr
    assert f"got {threads}" in done.stderr
