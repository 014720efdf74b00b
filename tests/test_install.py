"""An installed tisim works anywhere: the wheel carries the robots, bodies and recorded data, and a copy installed from
it finds them through the package from any folder."""
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent

USE = textwrap.dedent("""
    import pathlib, sys
    import numpy as np
    import tisim
    from tisim.core import assets
    from tisim.systems import MPM, MassSpring
    from tisim.systems.mpm import Body
    assert pathlib.Path(tisim.__file__).is_relative_to(sys.argv[1]), tisim.__file__  # the installed copy
    assert assets.ASSETS.is_relative_to(sys.argv[1]), assets.ASSETS
    robots = sorted(p.stem for p in (assets.ASSETS / "robots").glob("*.json"))
    bodies = sorted(p.stem for p in (assets.ASSETS / "bodies").glob("*.json"))
    for name in robots:
        pos = MassSpring(horizon=3, robot=name).rollout()["pos"]
        assert pos.shape[1] == 4 and np.all(np.isfinite(pos)), name
    for name in bodies:
        pos = MPM(horizon=2, body=Body.load(name, origin=[0.1, 0.1])).rollout()["pos"]
        assert pos.shape[1] == 3 and np.all(np.isfinite(pos)), name
    for path in sorted((assets.ASSETS / "data").glob("*.npz")):
        assert len(np.load(path).files) > 0, path
    print("robots", ",".join(robots), "bodies", ",".join(bodies))
""")


def test_the_wheel_carries_the_assets_and_an_installed_copy_finds_them(tmp_path):
    """Build the wheel from a copy of the sources, install it into its own folder (its dependencies stay those of
    this environment), and from another folder load every robot and body by name and roll each out."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "assets", source / "assets")
    shutil.copytree(ROOT / "tisim", source / "tisim", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    assert (source / "tisim" / "assets").is_symlink()  # the checkout's link, not a copy of the files
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "wheel"), str(source)], check=True, capture_output=True, timeout=300)
    [wheel] = (tmp_path / "wheel").glob("tisim-*.whl")
    carried = set(zipfile.ZipFile(wheel).namelist())
    expected = {"tisim/" + str(p.relative_to(ROOT)) for p in (ROOT / "assets").rglob("*") if p.is_file()}
    assert {"tisim/assets/robots/worm.json", "tisim/assets/bodies/walker.json"} <= expected
    assert expected <= carried, sorted(expected - carried)

    target = tmp_path / "installed"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target),
                    str(wheel)], check=True, capture_output=True, timeout=300)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "use.py").write_text(USE)
    env = dict(os.environ, PYTHONPATH=str(target), MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, "use.py", str(target)], cwd=elsewhere, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    robots = sorted(p.stem for p in (ROOT / "assets" / "robots").glob("*.json"))
    assert f"robots {','.join(robots)} bodies walker" in done.stdout
