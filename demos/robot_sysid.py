# Robot system identification across two simulators: MuJoCo is the "real" robot, tisim the model fitted to it.
#
# Gymnasium's inverted double pendulum (a cart on a slide carrying two poles on hinges, its MJCF file compiled by
# MuJoCo), its poles hanging down, is given masses and joint damping that differ from the file's: the "true" robot.
# MuJoCo's mj_step (RK4, limits and contacts off) records four experiments of 2 s, each from its own initial state
# under its own cart force (two sines), and the joint positions are "measured" with Gaussian noise of 2 mm and
# 2 mrad; the velocities are not measured. tisim's Articulation of the same file, starting from the file's values,
# fits the three bodies' masses and the three joints' damping to the recordings by Adam on the tracking loss's
# gradient (tisim.tasks.identify; masses and damping in log space, so they stay positive), the four experiments one
# batch. The masses come out within 0.3% and the slider's and the upper hinge's damping within 10%; the lower
# hinge's damping (0.02 N m s/rad against the poles' gravity torques of tens of N m) moves the angles by less than
# the noise in 2 s: these recordings cannot tell it, and the fit leaves it wherever the noise puts it (the residual
# is at the noise's level). Prints the true, initial and fitted values and the fit's residual against the noise, and
# writes out/robot_sysid.json (the same figures) and out/robot_sysid.png (measured and fitted angles of one
# experiment).
#
# Command: python demos/robot_sysid.py [--out out] [--iterations 300] [--seed 0]
import argparse
import json
import os
import pathlib

import numpy as np

import tisim
from tisim.losses import Tracking
from tisim.optim import Adam
from tisim.systems.articulation import Articulation, load_mjcf
from tisim.tasks import identify

HORIZON, EXPERIMENTS, NOISE = 200, 4, 2e-3  # steps of the file's 10 ms, experiments, m and rad
TRUE_MASS_FACTOR = np.array([0.9, 1.25, 1.3])  # cart, pole, pole2: the true masses against the file's
TRUE_DAMPING = np.array([0.1, 0.02, 0.08])  # slider [N s/m], hinge, hinge2 [N m s/rad]; the file says 0.05 for all


def asset():
    import gymnasium
    return os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "inverted_double_pendulum.xml")


def record(seed):
    """The true robot in MuJoCo: initial states (hanging, nudged), cart forces and noisy measured positions."""
    import mujoco
    model = mujoco.MjModel.from_xml_path(asset())
    model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_LIMIT
    model.body_mass[1:] *= TRUE_MASS_FACTOR
    model.dof_damping[:] = TRUE_DAMPING
    data = mujoco.MjData(model)
    rng = np.random.default_rng(seed)
    t = np.arange(HORIZON) * model.opt.timestep
    initial = np.stack([[0.0, np.pi, 0.0] + rng.normal(0, 0.6, 3) for _ in range(EXPERIMENTS)])
    forces = np.stack([0.06 * np.sin(2 * np.pi * rng.uniform(0.5, 1.5) * t + rng.uniform(0, 2 * np.pi))
                       + 0.03 * np.sin(2 * np.pi * rng.uniform(1.5, 3.0) * t) for _ in range(EXPERIMENTS)])
    positions = np.zeros((EXPERIMENTS, HORIZON + 1, model.nq))
    for e in range(EXPERIMENTS):
        mujoco.mj_resetData(model, data)
        data.qpos[:] = initial[e]
        positions[e, 0] = data.qpos
        for k in range(HORIZON):
            data.ctrl[:] = forces[e, k]
            mujoco.mj_step(model, data)
            positions[e, k + 1] = data.qpos
    measured = positions + NOISE * rng.standard_normal(positions.shape)
    return initial, forces, measured, dict(body_mass=np.array(model.body_mass[1:]),
                                            joint_damping=TRUE_DAMPING.copy())


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "Fit the masses and joint damping of tisim's model of Gymnasium's inverted double pendulum to noisy joint "
        "positions recorded from MuJoCo's simulation of a robot whose masses and damping differ from the file's. "
        "Writes robot_sysid.json and robot_sysid.png."))
    parser.add_argument("--out", default="out", help="folder for robot_sysid.json and robot_sysid.png")
    parser.add_argument("--iterations", type=int, default=300, help="Adam iterations (>= 1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the experiments and the noise")
    args = parser.parse_args(argv)
    if args.iterations < 1:
        parser.error(f"--iterations must be >= 1, got {args.iterations}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    tisim.init()
    initial, forces, measured, true = record(args.seed)
    tree = load_mjcf(asset(), ignore=("limits",))  # the slide's limit is off in the recording too
    sim = Articulation(horizon=HORIZON, batch=EXPERIMENTS, tree=tree)
    sim.set_initial_state(q=initial, qd=np.zeros_like(initial))
    sim.set_actions(forces[..., None])
    names = ["body_mass", "joint_damping"]
    start = {n: sim.params[n][0].copy() for n in names}
    data = {"q": measured, "qd": np.full(measured.shape, np.nan)}  # velocities are not measured
    result = identify(sim, Tracking(data), names, iterations=args.iterations, optimizer=Adam(lr=0.02),
                      progress=True)
    fitted = {n: sim.params[n][0] for n in names}
    residual = float(np.sqrt(np.mean((sim.rollout()["q"] - measured) ** 2)))
    labels = {"body_mass": ("cart", "pole", "pole2"), "joint_damping": ("slider", "hinge", "hinge2")}
    figures = {}
    for n in names:
        for k, label in enumerate(labels[n]):
            figures[f"{n}[{label}]"] = dict(true=float(true[n][k]), initial=float(start[n][k]),
                                            fitted=float(fitted[n][k]),
                                            error=float(fitted[n][k] / true[n][k] - 1.0))
            print(f"{n}[{label}]: true {true[n][k]:.4f}, initial {start[n][k]:.4f}, fitted {fitted[n][k]:.4f} "
                  f"({100 * figures[f'{n}[{label}]']['error']:+.1f}%)")
    print(f"residual of the fit {residual * 1e3:.2f} (noise {NOISE * 1e3:.1f}), m and rad x 1e-3")
    report = dict(parameters=figures, residual=residual, noise=NOISE, iterations=result.iterations,
                  seconds=round(result.seconds, 2), seed=args.seed)
    (out / "robot_sysid.json").write_text(json.dumps(report, indent=1) + "\n")

    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
    t = np.arange(HORIZON + 1) * sim.dt
    for k, label in ((1, "hinge"), (2, "hinge2")):
        axes.plot(t, measured[0, :, k], ".", markersize=2, label=f"{label}, measured (MuJoCo + noise)")
        axes.plot(t, sim.rollout()["q"][0, :, k], label=f"{label}, fitted tisim model")
    axes.set(xlabel="time [s]", ylabel="joint angle [rad]", title="robot system identification, experiment 1")
    axes.legend(fontsize=8, loc="lower left")
    figure.savefig(out / "robot_sysid.png", dpi=100)
    plt.close(figure)
    print(f"wrote {out / 'robot_sysid.json'} and {out / 'robot_sysid.png'}")
    return report


if __name__ == "__main__":
    main()
