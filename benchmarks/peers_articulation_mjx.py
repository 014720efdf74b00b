# MJX (MuJoCo's JAX port) on a workload of peers_articulation.py: a jitted rollout of mjx.step under jax.lax.scan,
# batched by jax.vmap, the loss sum_b |qpos_T|^2 + |qvel_T|^2 and its gradient with respect to the actions by
# jax.value_and_grad, in float64 on JAX's CPU backend. Times the first call of each (compilation) apart from the median
# of `repeats` calls, each after an untimed call.
#
# MJX needs MuJoCo 3.x, so it runs in a venv of its own, apart from the main one:
#     python3.11 -m venv .venv-mjx && .venv-mjx/bin/pip install mujoco==3.17.0 mujoco-mjx==3.17.0 \
#         jax==0.10.2 jaxlib==0.10.2 numpy==2.4.6
#     .venv-mjx/bin/python benchmarks/peers_articulation_mjx.py IN.npz OUT.json
# IN.npz: xml (MJCF text or a path, 0-d string array), disable_contacts_limits (bool), integrator ("euler"),
#         qpos (B, nq), qvel (B, nv), actions (B, T, nu), repeats (int)
# OUT.json: versions, xla_flags, loss (per batch element), grad (dL/d(actions), B x T x nu), grad_max_abs,
#           grad_first (element 0's), compile_forward_s, compile_gradient_s, forward_s, gradient_s
import importlib.metadata
import json
import os
import statistics
import sys
import time

# XLA's CPU fusion emitters make code whose run time grows exponentially with the depth of MJX's body-tree scans
# (mjx's kinematics on a 7-deep chain: 3 ms a call against 20 us with the older emitters); off unless XLA_FLAGS says
if "xla_cpu_use_fusion_emitters" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_use_fusion_emitters=false").strip()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)  # before any array is made: the comparison with MuJoCo's C engine is at 1e-9

import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from mujoco import mjx  # noqa: E402


def model_of(xml, disable_contacts_limits, integrator):
    """The MjModel as peers_articulation.py's `workload` sets it up."""
    xml = str(xml)
    if xml.lstrip().startswith("<"):
        model = mujoco.MjModel.from_xml_string(xml)
    else:
        model = mujoco.MjModel.from_xml_path(xml)
    if disable_contacts_limits:
        model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_LIMIT
    integrators = {"euler": mujoco.mjtIntegrator.mjINT_EULER, "rk4": mujoco.mjtIntegrator.mjINT_RK4,
                   "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST}
    model.opt.integrator = integrators[str(integrator).lower()]
    return model


def functions(model):
    """forward(qpos, qvel, actions) -> the losses (B,); gradient(actions, qpos, qvel) -> (their sum, dL/d(actions))."""
    m = mjx.put_model(model)
    blank = mjx.make_data(m)

    def element_loss(qpos, qvel, actions):
        def step(d, u):
            return mjx.step(m, d.replace(ctrl=u)), None

        final, _ = jax.lax.scan(step, blank.replace(qpos=qpos, qvel=qvel), actions)
        return jnp.sum(final.qpos ** 2) + jnp.sum(final.qvel ** 2)

    batched = jax.vmap(element_loss)

    def total(actions, qpos, qvel):
        return jnp.sum(batched(qpos, qvel, actions))

    return jax.jit(batched), jax.jit(jax.value_and_grad(total))


def timed(call):
    start = time.perf_counter()
    jax.block_until_ready(call())
    return time.perf_counter() - start


def median_time(call, repeats):
    times = []
    for _ in range(repeats):
        jax.block_until_ready(call())
        times.append(timed(call))
    return statistics.median(times)


def versions():
    return {name: importlib.metadata.version(name) for name in ("mujoco", "mujoco-mjx", "jax", "jaxlib", "numpy")}


def main(path_in, path_out):
    inputs = np.load(path_in, allow_pickle=False)
    model = model_of(inputs["xml"][()], bool(inputs["disable_contacts_limits"]), inputs["integrator"][()])
    qpos, qvel, actions = (jnp.asarray(inputs[k], dtype=jnp.float64) for k in ("qpos", "qvel", "actions"))
    repeats = int(inputs["repeats"])
    assert qpos.shape[1] == model.nq and qvel.shape[1] == model.nv and actions.shape[2] == model.nu, \
        f"the problem's shapes {qpos.shape}, {qvel.shape}, {actions.shape} do not fit the model"

    forward, gradient = functions(model)
    record = dict(versions=versions(), xla_flags=os.environ["XLA_FLAGS"], device=str(jax.devices()[0]),
                  batch=int(actions.shape[0]), T=int(actions.shape[1]), nq=int(model.nq), nv=int(model.nv),
                  nu=int(model.nu))
    record["compile_forward_s"] = timed(lambda: forward(qpos, qvel, actions))
    record["compile_gradient_s"] = timed(lambda: gradient(actions, qpos, qvel))
    record["forward_s"] = median_time(lambda: forward(qpos, qvel, actions), repeats)
    record["gradient_s"] = median_time(lambda: gradient(actions, qpos, qvel), repeats)

    losses = np.asarray(forward(qpos, qvel, actions))
    _, grad = gradient(actions, qpos, qvel)
    grad = np.asarray(grad)
    record.update(loss=losses.tolist(), grad=grad.tolist(), grad_max_abs=float(np.abs(grad).max()),
                  grad_first=grad[0].tolist())
    os.makedirs(os.path.dirname(os.path.abspath(path_out)), exist_ok=True)
    with open(path_out, "w") as f:
        json.dump(record, f)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python benchmarks/peers_articulation_mjx.py IN.npz OUT.json")
    main(sys.argv[1], sys.argv[2])
