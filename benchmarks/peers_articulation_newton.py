# NVIDIA Newton's Featherstone solver (Warp, wp.Tape, CPU) on a peers_articulation.py workload: a worker run in its
# own virtual environment, since Newton brings its own Warp and numpy.
#
# What: B copies of an MJCF model in one Newton model (one world each, as Newton batches environments), stepped T
# times by SolverFeatherstone on the CPU from the given initial states with the given actions (motor torques, gear
# times ctrl, ctrl clamped to ctrlrange where it is limited); contacts and joint limits off. Loss per element:
# |q_T|^2 + |qd_T|^2 in MuJoCo's coordinates (qpos with w-first quaternions, qvel with a free joint's linear velocity
# at the body origin and ball and free angular velocities in the child body's frame). Gradient: dL/d(actions) by
# wp.Tape through the whole rollout. Everything is float32, as Newton's kernels are written: world positions far from
# the origin lose digits (gymnasium's ant, free of its floor, falls 120 m in 5 s).
#
#     python benchmarks/peers_articulation_newton.py IN.npz OUT.json
#
# IN.npz: xml (MJCF text as a 0-d string array, or a path), qpos (B, nq), qvel (B, nv) in MuJoCo's conventions,
# actions (B, T, nu), dt, repeats. OUT.json: versions, setup and first-call times, the medians of `repeats` calls
# after an untimed one (forward: rollout + loss; gradient: rollout + loss + tape.backward + dL/du as numpy), losses,
# final qpos and qvel, dL/du (B, T, nu).
#
# Environment (Python 3.11, CPU only; Warp prints that it finds no CUDA driver and goes on):
#     python3.11 -m venv .venv-newton
#     .venv-newton/bin/pip install newton==1.8.0      # brings warp-lang 1.19.0 and numpy
import json
import platform
import statistics
import sys
import time

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING  # before newton, whose import starts Warp: no banner, no module-load lines
import newton  # noqa: E402

REVOLUTE = wp.constant(int(newton.JointType.REVOLUTE))
PRISMATIC = wp.constant(int(newton.JointType.PRISMATIC))
BALL = wp.constant(int(newton.JointType.BALL))
FREE = wp.constant(int(newton.JointType.FREE))


@wp.kernel
def apply_actions(actions: wp.array3d(dtype=float), t: int, dof: wp.array(dtype=int), gear: wp.array(dtype=float),
                  lower: wp.array(dtype=float), upper: wp.array(dtype=float), nv: int,
                  joint_f: wp.array(dtype=float)):
    b, a = wp.tid()
    joint_f[b * nv + dof[a]] = gear[a] * wp.clamp(actions[b, t, a], lower[a], upper[a])


@wp.kernel
def to_mujoco(joint_type: wp.array(dtype=int), joint_child: wp.array(dtype=int), q_start: wp.array(dtype=int),
              qd_start: wp.array(dtype=int), body_com: wp.array(dtype=wp.vec3), q: wp.array(dtype=float),
              qd: wp.array(dtype=float), qpos: wp.array(dtype=float), qvel: wp.array(dtype=float)):
    """Newton's joint_q, joint_qd (xyzw quaternions, ball velocities in the parent's frame, a free joint's
    velocities at the centre of mass in the world frame) as MuJoCo's qpos, qvel; the index ranges are the same."""
    j = wp.tid()
    kind = joint_type[j]
    i = q_start[j]
    k = qd_start[j]
    if kind == REVOLUTE or kind == PRISMATIC:
        qpos[i] = q[i]
        qvel[k] = qd[k]
    if kind == BALL:
        r = wp.quat(q[i], q[i + 1], q[i + 2], q[i + 3])
        w = wp.quat_rotate_inv(r, wp.vec3(qd[k], qd[k + 1], qd[k + 2]))
        qpos[i] = r[3]
        qpos[i + 1] = r[0]
        qpos[i + 2] = r[1]
        qpos[i + 3] = r[2]
        qvel[k] = w[0]
        qvel[k + 1] = w[1]
        qvel[k + 2] = w[2]
    if kind == FREE:
        r = wp.quat(q[i + 3], q[i + 4], q[i + 5], q[i + 6])
        w_world = wp.vec3(qd[k + 3], qd[k + 4], qd[k + 5])
        v = wp.vec3(qd[k], qd[k + 1], qd[k + 2]) - wp.cross(w_world, wp.quat_rotate(r, body_com[joint_child[j]]))
        w = wp.quat_rotate_inv(r, w_world)
        qpos[i] = q[i]
        qpos[i + 1] = q[i + 1]
        qpos[i + 2] = q[i + 2]
        qpos[i + 3] = r[3]
        qpos[i + 4] = r[0]
        qpos[i + 5] = r[1]
        qpos[i + 6] = r[2]
        for c in range(3):
            qvel[k + c] = v[c]
            qvel[k + 3 + c] = w[c]


@wp.kernel
def sum_squares(x: wp.array(dtype=float), per_element: int, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, i // per_element, x[i] * x[i])


def quat_rotate(q, v):
    """Rotate v by the unit quaternion q = (w, x, y, z)."""
    w, u = q[0], np.asarray(q[1:])
    return v + 2.0 * w * np.cross(u, v) + 2.0 * np.cross(u, np.cross(u, v))


class Rollout:
    def __init__(self, xml, batch, horizon, dt):
        self.batch, self.horizon, self.dt = batch, horizon, dt
        single = newton.ModelBuilder()
        single.add_mjcf(xml)
        builder = newton.ModelBuilder()
        builder.replicate(single, batch)
        self.model = model = builder.finalize(device="cpu", requires_grad=True)
        self.nq = model.joint_coord_count // batch
        self.nv = model.joint_dof_count // batch
        kinds = model.joint_type.numpy()
        allowed = {int(newton.JointType.REVOLUTE), int(newton.JointType.PRISMATIC), int(newton.JointType.BALL),
                   int(newton.JointType.FREE), int(newton.JointType.FIXED)}
        if not set(kinds.tolist()) <= allowed:
            raise NotImplementedError(f"joint types {sorted(set(kinds.tolist()) - allowed)}")
        self.kinds = kinds[: model.joint_count // batch]
        self.q_start = model.joint_q_start.numpy()[: model.joint_count // batch]
        self.qd_start = model.joint_qd_start.numpy()[: model.joint_count // batch]
        identity = np.array([0, 0, 0, 0, 0, 0, 1.0])
        for j in np.flatnonzero(kinds == int(newton.JointType.FREE)):
            # the free joint's coordinates are then the body origin's pose, as MuJoCo's qpos
            assert np.allclose(model.joint_X_p.numpy()[j], identity) and np.allclose(model.joint_X_c.numpy()[j],
                                                                                     identity)
        self.body_com = model.body_com.numpy()[: model.body_count // batch]
        self.child = model.joint_child.numpy()[: model.joint_count // batch]

        # MuJoCo's Euler treats joint damping implicitly: (M + dt D) qacc = f - D qd. Featherstone applies the
        # damping force explicitly and adds the armature to the mass matrix's diagonal, so armature + dt * damping
        # gives the same equations.
        damping = model.joint_damping.numpy()
        model.joint_armature.assign(model.joint_armature.numpy() + dt * damping)
        # limits off, as the MuJoCo models' disable flag has them
        model.joint_limit_ke.zero_()
        model.joint_limit_kd.zero_()
        model.joint_limit_lower.fill_(-1e10)
        model.joint_limit_upper.fill_(1e10)

        # motors: ctrl times gear on the joint's degree of freedom (the importer keeps MuJoCo's actuator table)
        mj = model.mujoco
        nu = len(mj.actuator_trntype.numpy()) // batch
        if nu and not (np.all(mj.actuator_trntype.numpy()[:nu] == 0) and np.all(mj.actuator_gaintype.numpy()[:nu] == 0)
                       and np.all(mj.actuator_biastype.numpy()[:nu] == 0)
                       and np.all(mj.actuator_dyntype.numpy()[:nu] == 0)):
            raise NotImplementedError("only joint motors (fixed gain, no bias, no dynamics)")
        dof = mj.actuator_trnid.numpy()[:nu, 0].astype(np.int32)
        assert len(set(dof.tolist())) == nu, "one motor per degree of freedom"
        gain = mj.actuator_gainprm.numpy()[:nu, 0]
        gear = mj.actuator_gear.numpy()[:nu, 0] * gain
        limited = (mj.actuator_ctrllimited.numpy()[:nu] == 1) | ((mj.actuator_ctrllimited.numpy()[:nu] == 2)
                                                                & (mj.actuator_has_ctrlrange.numpy()[:nu] == 1))
        ctrlrange = mj.actuator_ctrlrange.numpy()[:nu]
        self.nu = nu
        self.dof = wp.array(dof, dtype=int, device="cpu")
        self.gear = wp.array(gear, dtype=float, device="cpu")
        self.lower = wp.array(np.where(limited, ctrlrange[:, 0], -1e30), dtype=float, device="cpu")
        self.upper = wp.array(np.where(limited, ctrlrange[:, 1], 1e30), dtype=float, device="cpu")

        # The solver keeps its mass matrix, Jacobian and Cholesky factor in buffers of its own that every step
        # overwrites, and the tape's backward pass reads them when it runs: through one solver, every step's adjoint
        # would see the last step's matrices (the gradient is then wrong). The taped rollout steps with one solver
        # per step; the plain rollout with the first.
        self.solvers = [newton.solvers.SolverFeatherstone(model) for _ in range(horizon)]
        # the taped rollout keeps every state (the backward pass reads them) and every step's joint forces
        self.states = [model.state(requires_grad=True) for _ in range(horizon + 1)]
        self.forces = [wp.zeros(model.joint_dof_count, dtype=float, device="cpu", requires_grad=True)
                       for _ in range(horizon)]
        self.control = model.control()
        # the plain rollout steps two states in turn
        self.plain = [model.state(requires_grad=False), model.state(requires_grad=False)]
        self.plain_force = wp.zeros(model.joint_dof_count, dtype=float, device="cpu")
        self.actions = wp.zeros((batch, horizon, max(nu, 1)), dtype=float, device="cpu", requires_grad=True)
        self.qpos = wp.zeros(model.joint_coord_count, dtype=float, device="cpu", requires_grad=True)
        self.qvel = wp.zeros(model.joint_dof_count, dtype=float, device="cpu", requires_grad=True)
        self.loss = wp.zeros(batch, dtype=float, device="cpu", requires_grad=True)

    def set_problem(self, qpos, qvel, actions):
        """MuJoCo's qpos, qvel as Newton's joint_q, joint_qd."""
        assert np.shape(qpos) == (self.batch, self.nq) and np.shape(qvel) == (self.batch, self.nv)
        assert np.shape(actions) == (self.batch, self.horizon, self.nu)
        q, qd = np.array(qpos, dtype=np.float64), np.array(qvel, dtype=np.float64)
        for b in range(self.batch):
            for j, kind in enumerate(self.kinds):
                i, k = self.q_start[j], self.qd_start[j]
                if kind == int(newton.JointType.BALL) or kind == int(newton.JointType.FREE):
                    o = 3 if kind == int(newton.JointType.FREE) else 0
                    # MuJoCo computes with the quaternion normalized (and stores it so after a step)
                    r = qpos[b, i + o:i + o + 4] / np.linalg.norm(qpos[b, i + o:i + o + 4])
                    q[b, i + o:i + o + 4] = [r[1], r[2], r[3], r[0]]
                    w = quat_rotate(r, qvel[b, k + o:k + o + 3])
                    qd[b, k + o:k + o + 3] = w
                    if o:
                        qd[b, k:k + 3] = qvel[b, k:k + 3] + np.cross(w, quat_rotate(r, self.body_com[self.child[j]]))
        self.q0, self.qd0 = q.reshape(-1), qd.reshape(-1)
        self.actions.assign(np.asarray(actions, dtype=np.float32).reshape(self.actions.shape))

    def _step(self, t, state_in, state_out, force):
        wp.launch(apply_actions, dim=(self.batch, self.nu),
                  inputs=[self.actions, t, self.dof, self.gear, self.lower, self.upper, self.nv], outputs=[force],
                  device="cpu")
        self.control.joint_f = force
        self.solvers[t if state_in.requires_grad else 0].step(state_in, state_out, self.control, None, self.dt)

    def _loss(self, state):
        self.loss.zero_()
        wp.launch(to_mujoco, dim=self.model.joint_count,
                  inputs=[self.model.joint_type, self.model.joint_child, self.model.joint_q_start,
                          self.model.joint_qd_start, self.model.body_com, state.joint_q, state.joint_qd],
                  outputs=[self.qpos, self.qvel], device="cpu")
        wp.launch(sum_squares, dim=len(self.qpos), inputs=[self.qpos, self.nq], outputs=[self.loss], device="cpu")
        wp.launch(sum_squares, dim=len(self.qvel), inputs=[self.qvel, self.nv], outputs=[self.loss], device="cpu")

    def forward(self):
        """Rollout and loss, no tape."""
        a, b = self.plain
        a.joint_q.assign(self.q0)
        a.joint_qd.assign(self.qd0)
        for t in range(self.horizon):
            self._step(t, a, b, self.plain_force)
            a, b = b, a
        self._loss(a)
        return self.loss.numpy().astype(np.float64)

    def gradient(self):
        """Rollout and loss on a tape, then dL/d(actions) of every element's loss."""
        self.states[0].joint_q.assign(self.q0)
        self.states[0].joint_qd.assign(self.qd0)
        tape = wp.Tape()
        with tape:
            for t in range(self.horizon):
                self._step(t, self.states[t], self.states[t + 1], self.forces[t])
            self._loss(self.states[-1])
        tape.backward(grads={self.loss: wp.ones(self.batch, dtype=float, device="cpu")})
        grad = self.actions.grad.numpy()[:, :, : self.nu].astype(np.float64)
        losses = self.loss.numpy().astype(np.float64)
        tape.zero()
        self.actions.grad.zero_()
        return losses, grad


def median_time(call, repeats):
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(path_in, path_out):
    data = np.load(path_in)
    xml = str(data["xml"])
    qpos, qvel, actions = data["qpos"], data["qvel"], data["actions"]
    batch, horizon = actions.shape[0], actions.shape[1]
    dt, repeats = float(data["dt"]), int(data["repeats"])
    wp.set_device("cpu")
    wp.init()
    start = time.perf_counter()
    run = Rollout(xml, batch, horizon, dt)  # add_mjcf takes a path or the text
    run.set_problem(qpos, qvel, actions)
    setup = time.perf_counter() - start
    # Warp compiles a module the first time one of its kernels runs (then loads it from its kernel cache, by default
    # ~/.cache/warp): setup compiles Newton's, the first forward this file's
    start = time.perf_counter()
    run.forward()
    first_forward = time.perf_counter() - start
    start = time.perf_counter()
    losses, grad = run.gradient()
    first_gradient = time.perf_counter() - start
    final_q, final_qd = run.qpos.numpy().reshape(batch, -1), run.qvel.numpy().reshape(batch, -1)
    forward_losses = run.forward()
    record = dict(
        what="Newton SolverFeatherstone on the CPU, float32, dL/du by wp.Tape",
        versions=dict(newton=newton.__version__, warp=wp.__version__, numpy=np.__version__,
                      python=platform.python_version()),
        device=str(wp.get_device()), batch=int(batch), T=int(horizon), dt=dt, repeats=repeats,
        setup_s=setup, first_forward_s=first_forward, first_gradient_s=first_gradient,
        forward_s=median_time(run.forward, repeats), gradient_s=median_time(run.gradient, repeats),
        loss=losses.tolist(), forward_loss=forward_losses.tolist(),
        final_qpos=final_q.astype(np.float64).tolist(), final_qvel=final_qd.astype(np.float64).tolist(),
        grad_actions=grad.tolist())
    with open(path_out, "w") as f:
        json.dump(record, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
