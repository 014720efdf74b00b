"""What the gradient mechanisms and the loops around a simulator may use of it, beyond its public surface.

A mechanism (tisim/autodiff/: checkpointing, forward_mode, continuous_adjoint, jacobians, tape) reads a simulator's
public attributes (T, B, dt, the layouts, the device arrays theta, u, x0, x, loss) and, for everything else, goes
through ``Protocol.of(sim)``: the bound kernel launcher, the steps, the start of a pass, the bound losses, the read-back
of a gradient group, the status buffer, the compiled kernels, and a store of the mechanism's own buffers (made on first
use, kept with the simulator across passes). No other module reaches into a simulator's private attributes
(tests/test_packaging.py checks it), so the engine can change behind this one class.
"""


class Protocol:
    """One simulator's side of the protocol (see the module docstring)."""

    def __init__(self, sim):
        self._sim = sim
        self._buffers = {}

    @classmethod
    def of(cls, sim):
        protocol = sim.__dict__.get("_protocol")
        if protocol is None:
            protocol = sim.__dict__["_protocol"] = cls(sim)
        return protocol

    # ---- running kernels -----------------------------------------------------------------------------------------
    def launch(self, kernel, *args, grad=False):
        """kernel(*args), or its reverse-mode gradient, through the simulator's bound calls (tisim/core/launch.py)."""
        return self._sim._launch(kernel, *args, grad=grad)

    def steps(self, x, u, t0, t1, serial, grad=False):
        """Steps t0..t1-1 of the states x (B, n+1, S) under the actions u (B, n, A), or their gradient."""
        self._sim._steps(x, u, t0, t1, serial, grad)

    @property
    def kernels(self):
        """The simulator's model, the compiled kernels' host (its _rollout_fields for forward mode, _rates for the
        continuous adjoint)."""
        return self._sim.model

    @property
    def serial(self):
        """Whether the simulator's batch loops over its whole trajectory run serialized."""
        return self._sim._serial

    @property
    def per_step(self):
        """Whether the simulator runs a launch per step (a GPU's schedule); settable, so that a CPU can check that
        schedule against the fused one."""
        return self._sim._per_step

    @per_step.setter
    def per_step(self, on):
        self._sim._per_step = bool(on)

    @property
    def status(self):
        """The host array (B, 2) a pass's status kernel fills: (loss, first non-finite step)."""
        return self._sim._status_host

    # ---- passes ----------------------------------------------------------------------------------------------------
    def begin_pass(self):
        """Before a pass overwrites the arrays: check the runtime, settle the last Gradient, upload the inputs."""
        self._sim._begin_pass()

    @property
    def passes(self):
        """How many passes have begun on the simulator: a caller that leaves a pass's results in the arrays until
        later (a rollout recorded on a ti.ad.Tape) checks that no pass overwrote them meanwhile."""
        return self._sim._passes

    def bound(self, loss):
        """The loss bound to this simulator's layouts and horizon (kept for the next pass)."""
        return self._sim._bind(loss)

    def forward(self, loss=None, grads=False):
        """The unrolled forward pass into sim.x; the per-element losses. grads: zero the gradients for a backward."""
        return self._sim._forward(loss, grads)

    def backward(self):
        """The reverse-mode sweep of the whole rollout, from the adjoint already in sim.x.grad."""
        self._sim._backward_rollout()

    def fetch(self, group):
        """A gradient group read back from the device arrays: "params", "actions", "initial_state" or "adjoint"."""
        return self._sim._fetch_gradient(group)

    # ---- inputs ----------------------------------------------------------------------------------------------------
    @property
    def inputs(self):
        """The host copies of the inputs, packed: {"params": (B, P), "initial_state": (B, S), "actions": (B, T A)}.
        Edit them in place, then call invalidate()."""
        sim = self._sim
        return {"params": sim._theta, "initial_state": sim._x0, "actions": sim._u.reshape(sim.B, -1)}

    def invalidate(self):
        """Upload every host-side input before the next pass."""
        self._sim._invalidate()

    def validated_actions(self, actions):
        """Actions checked as set_actions checks them, broadcast to (B, T, *shape)."""
        return self._sim._validated_actions(actions)

    # ---- the mechanisms' own buffers -----------------------------------------------------------------------------
    def buffers(self, key, make):
        """The buffers stored under key, made by make() on first use (a mechanism's segment arrays, its fields)."""
        if key not in self._buffers:
            self._buffers[key] = make()
        return self._buffers[key]

    def held(self, key):
        """The buffers stored under key, or None."""
        return self._buffers.get(key)
