# tisim's Articulation next to its peers, in one process run, on the same models and the same steps: MuJoCo's C
# engine, MJX (MuJoCo's JAX port) and NVIDIA Newton's Featherstone solver (Warp).
#
# Workloads (contact- and limit-free, so all step the same equations: agreement is asserted before any timing):
#   chain7       a 7-link chain hanging from the world, six hinges about alternating axes and a ball joint in the
#                middle (9 degrees of freedom), a motor on every hinge, joint damping, MuJoCo's semi-implicit Euler
#                at 5 ms, T = 500, at batch 1 and 256 (random initial states and actions per batch element)
#   ant          Gymnasium's ant.xml (a free torso, eight hinges: 14 degrees of freedom), contacts and limits off,
#                Euler at its 10 ms, T = 500, batch 1: a floating robot's tree without its floor
# The loss is |q_T|^2 + |qd_T|^2. Per implementation and workload:
#   forward      tisim: sim.evaluate (rollout + loss). MuJoCo: mujoco.rollout.rollout (its C loop over steps and batch
#                elements, one MjData per core, made once). MJX: jit of a lax.scan of mjx.step, vmap over the batch,
#                float64 on JAX's CPU backend. Newton: SolverFeatherstone stepped T times on the CPU (float32, B worlds
#                in one model).
#   gradient     tisim: sim.gradient (rollout, loss, one backward pass; dL/d(actions) and the rest). MJX:
#                jax.value_and_grad of the same jitted rollout. Newton: wp.Tape through the rollout, one solver per
#                step (its Featherstone solver keeps its mass matrices in the solver, so one solver stepped T times
#                gives the backward pass the last step's matrices: a wrong gradient). MuJoCo has no reverse mode:
#                mjd_transitionFD's Jacobians (A, B) at every step of the rollout (centred differences, eps 1e-6),
#                chained backwards (lambda_t = A_t^T lambda_{t+1}, dL/du_t = B_t^T lambda_{t+1}); batch 1.
# Before timing: tisim's rollout equals MuJoCo's to 1e-9 and, at batch 1, its dL/du the chained differences to 1e-5 of
# its largest entry; MJX's loss equals tisim's to 1e-9 and its dL/du to 1e-6; Newton, in float32, to 1e-3 (its
# gradient on the ant to 0.1: the floorless ant falls 120 m, and float32 world positions lose the digits).
# Times: the median of --repeats calls after one untimed call (first calls compile: reported apart).
# MJX needs MuJoCo 3 and Newton its own Warp, so each runs in a virtual environment of its own, made by
# benchmarks/peer_venvs.sh (.venv-mjx, .venv-newton; the workers peers_articulation_mjx.py and _newton.py); a peer
# whose environment is missing gets a row that says so.
#
#     bash benchmarks/peer_venvs.sh     # once
#     TI_SKIP_VERSION_CHECK=ON TI_OFFLINE_CACHE_FILE_PATH=.cache/taichi .venv/bin/python \
#         benchmarks/peers_articulation.py [--workloads chain7,ant] [--peers mjx,newton] [--repeats 10] [--out out]
#     -> prints a markdown table and writes out/peers_articulation.json (date, command, machine, rows)
import argparse
import datetime
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from machine import describe

import tisim
from tisim.systems.articulation import Articulation, load_mjcf

CHAIN = """<mujoco model="chain7">
  <option timestep="0.005" integrator="Euler"/>
  <default><joint damping="0.05"/><geom type="capsule" size="0.03" contype="0" conaffinity="0"/></default>
  <worldbody>
    <body name="l1" pos="0 0 2"><joint name="j1" axis="0 1 0"/><geom fromto="0 0 0 0 0 -0.25"/>
     <body name="l2" pos="0 0 -0.25"><joint name="j2" axis="1 0 0"/><geom fromto="0 0 0 0 0 -0.25"/>
      <body name="l3" pos="0 0 -0.25"><joint name="j3" axis="0 1 0"/><geom fromto="0 0 0 0 0 -0.25"/>
       <body name="l4" pos="0 0 -0.25"><joint name="b4" type="ball"/><geom fromto="0 0 0 0 0 -0.25"/>
        <body name="l5" pos="0 0 -0.25"><joint name="j5" axis="1 0 0"/><geom fromto="0 0 0 0 0 -0.25"/>
         <body name="l6" pos="0 0 -0.25"><joint name="j6" axis="0 1 0"/><geom fromto="0 0 0 0 0 -0.25"/>
          <body name="l7" pos="0 0 -0.25"><joint name="j7" axis="1 0 0"/><geom fromto="0 0 0 0 0 -0.25"/>
          </body></body></body></body></body></body></body>
  </worldbody>
  <actuator><motor joint="j1"/><motor joint="j2"/><motor joint="j3"/><motor joint="j5"/><motor joint="j6"/>
    <motor joint="j7"/></actuator>
</mujoco>"""
T = 500


def source(name):
    """A workload's MJCF: its text (chain7) or its file's path (ant)."""
    if name == "chain7":
        return CHAIN
    import gymnasium
    return os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "ant.xml")


def workload(name):
    """(MuJoCo model with contacts and limits off, tisim tree) of a workload."""
    import mujoco
    if name == "chain7":
        return mujoco.MjModel.from_xml_string(CHAIN), load_mjcf(CHAIN)
    path = source(name)
    model = mujoco.MjModel.from_xml_path(path)
    model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_LIMIT
    model.opt.integrator = 0  # Euler: MuJoCo's differences do not take RK4
    tree = load_mjcf(path, ignore=("contacts", "limits"))
    tree.integrator = "euler"
    return model, tree


def problem(model, batch, seed=0):
    """Initial qpos, qvel and actions (batch, T, nu), random, near the model's initial pose."""
    rng = np.random.default_rng(seed)
    qpos = model.qpos0 + rng.normal(0, 0.1, (batch, model.nq))
    return qpos, rng.normal(0, 0.5, (batch, model.nv)), rng.uniform(-0.5, 0.5, (batch, T, model.nu))


def median_time(call, repeats):
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def mujoco_gradient(model, qpos, qvel, actions):
    """dL/du by mjd_transitionFD chained backwards, L = |q_T|^2 + |qd_T|^2 (q in MuJoCo's tangent space: for the
    hinges and slides as tisim's, the quaternions' three turns apart; the loss here is on the coordinates)."""
    import mujoco
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = qpos, qvel
    n = 2 * model.nv
    As, Bs = [], []
    for t in range(T):
        data.ctrl[:] = actions[t]
        A, B = np.zeros((n, n)), np.zeros((n, model.nu))
        mujoco.mjd_transitionFD(model, data, 1e-6, True, A, B, None, None)
        As.append(A)
        Bs.append(B)
        mujoco.mj_step(model, data)
    # dL/dx_T in the tangent space: for a quaternion block, the coordinates' gradient turned into turns about the
    # body's axes (d q / d theta = q (0, e_k) / 2)
    lam = np.zeros(n)
    grad_q = 2.0 * data.qpos
    for j in range(model.njnt):
        qa, va = model.jnt_qposadr[j], model.jnt_dofadr[j]
        kind = model.jnt_type[j]
        if kind in (2, 3):  # slide, hinge
            lam[va] = grad_q[qa]
        else:
            offset = 3 if kind == 0 else 0
            if kind == 0:
                lam[va:va + 3] = grad_q[qa:qa + 3]
            quat = data.qpos[qa + offset:qa + offset + 4]
            for k in range(3):
                turn = np.zeros(4)
                turn[1 + k] = 1.0
                dq = 0.5 * quaternion_product(quat, turn)
                lam[va + offset + k] = grad_q[qa + offset:qa + offset + 4] @ dq
    lam[model.nv:] = 2.0 * data.qvel
    grad = np.zeros((T, model.nu))
    for t in range(T - 1, -1, -1):
        grad[t] = Bs[t].T @ lam
        lam = As[t].T @ lam
    return grad


def quaternion_product(a, b):
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw])


PEERS = {"mjx": (".venv-mjx", "peers_articulation_mjx.py"), "newton": (".venv-newton", "peers_articulation_newton.py")}
ROOT = pathlib.Path(__file__).resolve().parent.parent


def peer(kind, name, model, qpos, qvel, actions, repeats):
    """Run a peer's worker in its own environment on the problem; its record (loss, grad, times), or None with the
    reason when its environment is missing or it fails."""
    python = ROOT / PEERS[kind][0] / "bin" / "python"
    if not python.exists():
        return None, f"no {PEERS[kind][0]}: make it with bash benchmarks/peer_venvs.sh"
    with tempfile.TemporaryDirectory() as folder:
        inputs, outputs = os.path.join(folder, "in.npz"), os.path.join(folder, "out.json")
        np.savez(inputs, xml=np.array(source(name)), disable_contacts_limits=np.array(name == "ant"),
                 integrator=np.array("euler"), qpos=qpos, qvel=qvel, actions=actions,
                 dt=np.array(model.opt.timestep), repeats=np.array(repeats))
        done = subprocess.run([str(python), str(ROOT / "benchmarks" / PEERS[kind][1]), inputs, outputs],
                              capture_output=True, text=True)
        if done.returncode != 0:
            return None, f"{kind} failed: " + done.stderr.strip().splitlines()[-1]
        with open(outputs) as f:
            return json.load(f), None


def peer_agreement(name, kind, record, losses, grad):
    """A peer's loss and dL/du against tisim's (relative), asserted to its precision's bounds."""
    theirs = np.asarray(record["loss"])
    loss_gap = float(np.abs(theirs - losses).max() / np.abs(losses).max())
    g = np.asarray(record["grad" if kind == "mjx" else "grad_actions"])
    grad_gap = float(np.abs(g - grad).max() / np.abs(grad).max())
    loss_bound, grad_bound = (1e-9, 1e-6) if kind == "mjx" else (1e-3, 0.1 if name == "ant" else 1e-3)
    assert loss_gap < loss_bound, f"{name}: {kind}'s loss is {loss_gap:.2e} from tisim's"
    assert grad_gap < grad_bound, f"{name}: {kind}'s dL/du is {grad_gap:.2e} from tisim's"
    return loss_gap, grad_gap


def run(name, batch, repeats, peers=()):
    import mujoco
    import mujoco.rollout
    model, tree = workload(name)
    qpos, qvel, actions = problem(model, batch)
    row = dict(workload=name, batch=batch, T=T, dofs=int(model.nv))

    # MuJoCo's rollouts, and tisim's against them
    initial = np.concatenate([np.zeros((batch, 1)), qpos, qvel], axis=1)  # mjSTATE_PHYSICS: time, qpos, qvel
    state, _ = mujoco.rollout.rollout(model, mujoco.MjData(model), initial, actions)
    sim = Articulation(horizon=T, batch=batch, tree=tree)
    sim.set_initial_state(q=qpos, qd=qvel)  # no ref in these models: q is qpos
    sim.set_actions(actions)
    loss = tisim.losses.TerminalTarget({"q": np.zeros(sim.n_coordinates), "qd": np.zeros(sim.n_dofs)})
    start = time.perf_counter()
    traj = sim.rollout()
    row["tisim_first_forward_s"] = time.perf_counter() - start
    final = state[:, -1, 1:1 + model.nq]
    agreement = float(np.abs(traj["q"][:, -1] - final).max())
    assert agreement < 1e-9, f"{name}: tisim's rollout is {agreement:.2e} from MuJoCo's"
    row["rollout_agreement"] = agreement

    threads = [mujoco.MjData(model) for _ in range(os.cpu_count() or 1)]  # made once, as a loop would
    row["mujoco_forward_s"] = median_time(lambda: mujoco.rollout.rollout(model, threads, initial, actions), repeats)
    row["tisim_forward_s"] = median_time(lambda: sim.evaluate(loss), repeats)
    start = time.perf_counter()
    g = sim.gradient(loss)
    row["tisim_first_gradient_s"] = time.perf_counter() - start
    row["tisim_gradient_s"] = median_time(lambda: sim.gradient(loss), repeats)
    if batch == 1:
        reference = mujoco_gradient(model, qpos[0], qvel[0], actions[0])
        gap = float(np.abs(g.actions[0] - reference).max() / np.abs(reference).max())
        assert gap < 1e-5, f"{name}: tisim's dL/du is {gap:.2e} from MuJoCo's chained differences"
        row["gradient_agreement"] = gap
        row["mujoco_fd_gradient_s"] = median_time(lambda: mujoco_gradient(model, qpos[0], qvel[0], actions[0]),
                                                  max(1, repeats // 5))
    losses = np.asarray(sim.evaluate(loss))
    for kind in peers:
        record, reason = peer(kind, name, model, qpos, qvel, actions, repeats)
        if record is None:
            row[f"{kind}_missing"] = reason
            continue
        row[f"{kind}_loss_agreement"], row[f"{kind}_gradient_agreement"] = peer_agreement(name, kind, record, losses,
                                                                                      g.actions)
        row[f"{kind}_versions"] = record["versions"]
        row[f"{kind}_forward_s"], row[f"{kind}_gradient_s"] = record["forward_s"], record["gradient_s"]
        row[f"{kind}_first_s"] = (record["compile_forward_s"] + record["compile_gradient_s"] if kind == "mjx" else
                                  record["setup_s"] + record["first_forward_s"] + record["first_gradient_s"])
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description="tisim's Articulation against MuJoCo's C engine: rollouts and "
                                                 "gradients of the same models.")
    parser.add_argument("--workloads", default="chain7,ant")
    parser.add_argument("--peers", default="mjx,newton", help="peers besides MuJoCo's C engine: mjx, newton")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", default="out")
    args = parser.parse_args(argv)
    tisim.init(precision="f64")
    rows = []
    for name in args.workloads.split(","):
        for batch in ((1, 256) if name == "chain7" else (1,)):
            row = run(name, batch, args.repeats, [p for p in args.peers.split(",") if p])
            rows.append(row)
            print(json.dumps(row))
    print("\n| workload | batch | tisim forward | MuJoCo forward | MJX forward | Newton forward | tisim gradient | "
          "MJX gradient | Newton gradient | MuJoCo FD gradient |\n|---|---|---|---|---|---|---|---|---|---|")

    def ms(r, key):
        return f"{1e3 * r[key]:.2f} ms" if key in r else "-"
    for r in rows:
        print(f"| {r['workload']} ({r['dofs']} dofs) | {r['batch']} | {ms(r, 'tisim_forward_s')} | "
              f"{ms(r, 'mujoco_forward_s')} | {ms(r, 'mjx_forward_s')} | {ms(r, 'newton_forward_s')} | "
              f"{ms(r, 'tisim_gradient_s')} | {ms(r, 'mjx_gradient_s')} | {ms(r, 'newton_gradient_s')} | "
              f"{ms(r, 'mujoco_fd_gradient_s')} |")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = dict(date=datetime.date.today().isoformat(),
                  what="tisim's Articulation against MuJoCo's C engine, MJX and Newton's Featherstone solver",
                  command="python " + " ".join(sys.argv), machine=describe(),
                  software=dict(tisim="0.1.0", mujoco=__import__("mujoco").__version__), rows=rows)
    (out / "peers_articulation.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
