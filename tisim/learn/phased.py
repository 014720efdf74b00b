"""A policy inside a phased step: the network once a step, in a phase of its own, by run-time loops over arrays.

A phased step (mass-spring and MPM bodies, tisim/core/phases.py) reads its action once per item, so its closed loop
(tisim/learn/policy.py) runs the network in a first phase of one item, ``feedback``, which writes pi(o[t]) into kept
scratch that the action accessor adds to u[t] (tisim/core/access.py). A body observes hundreds of entries; unrolled,
the network took Taichi minutes to compile into the backward pass. Here the layers' values go into kept scratch
("policy_layers": the normalized observation z, then each hidden layer, then the network's output before the limit;
"policy_centre": the centroids), the loops run at run time, and the reverse, written by hand, reads them back and
keeps the derivatives of the same entries in the scratch's derivative. The functions take the closed loop's
``Policy`` (its plan, network and limit) as their first argument.
"""
import numpy as np
import taichi as ti


def segments(policy):
    """The plan as runs of one kind, (kind, first entry, count, first column, item width, first centroid):
    kind 0 entries, 1 angles (two columns each), 3 centred entries, 4 the clock's harmonics (two columns each)."""
    runs, k, column = [], 0, 0
    for name, shape in policy.shapes:
        size = int(np.prod(shape, dtype=int))
        if policy.timed and k + size == policy.n_state:  # the clock's own entry is read by its harmonics only
            break
        if not size:  # an empty table (a body without balls)
            continue
        if name in policy.centred:
            width = int(np.prod(shape[1:], dtype=int))
            first = [q for q, (offset, _, _, _) in enumerate(policy.centroids) if offset == k][0]
            runs.append((3, k, size, column, width, first))
            column += size
        elif k in policy.angle_entries:
            runs.append((1, k, size, column, 1, 0))
            column += 2 * size
        else:
            runs.append((0, k, size, column, 1, 0))
            column += size
        k += size
    if policy.timed:
        runs.append((4, policy.n_state - 1, policy.clock[1], column, 1, 0))
    return tuple(runs)


def units(policy):
    """(first unit of each layer's input, of the network's output, all units) in policy_layers."""
    sizes = policy.network.sizes
    starts = tuple(int(sum(sizes[:layer])) for layer in range(len(sizes)))
    return starts, starts[-1], int(sum(sizes))


@ti.func
def observe_into(policy: ti.template(), s: ti.template()):
    b, t = s.b, s.t
    P = ti.static(s.model.P)
    for q in ti.static(range(len(policy.centroids))):
        offset, items, width, c = ti.static(policy.centroids[q])
        total = 0.0
        for j in range(items):
            total += s.x[b, t, offset + j * width + c]
        s.assign("policy_centre", q, total / items)
    for r in ti.static(range(len(segments(policy)))):
        kind, first, count, column, width, centre = ti.static(segments(policy)[r])
        for e in range(count):
            value = s.x[b, t, first + e]
            if ti.static(kind == 0):
                normalized_into(s, P, column + e, value)
            elif ti.static(kind == 1):
                normalized_into(s, P, column + 2 * e, ti.sin(value))
                normalized_into(s, P, column + 2 * e + 1, ti.cos(value))
            elif ti.static(kind == 3):
                normalized_into(s, P, column + e, value - s.scratch("policy_centre", centre + e % width))
            else:
                angle = ti.static(2 * np.pi * policy.clock[0]) * (e + 1) * s.x[b, t, first]
                normalized_into(s, P, column + 2 * e, ti.sin(angle))
                normalized_into(s, P, column + 2 * e + 1, ti.cos(angle))


@ti.func
def normalized_into(s: ti.template(), P: ti.template(), column, phi):
    z = (phi - s.theta[s.b, P.obs_mean + column]) / s.theta[s.b, P.obs_scale + column]
    s.assign("policy_layers", column, z)


@ti.func
def network_into(policy: ti.template(), s: ti.template()):
    b, w = s.b, ti.static(s.model.P.w_policy)
    sizes, starts = ti.static(policy.network.sizes, units(policy)[0])
    for layer in ti.static(range(len(sizes) - 1)):
        a, n = ti.static(sizes[layer], sizes[layer + 1])
        k = ti.static(weights_before(policy, layer))
        for j in range(n):
            total = s.theta[b, w + k + a * n + j]
            for i in range(a):
                total += s.theta[b, w + k + i * n + j] * s.scratch("policy_layers", starts[layer] + i)
            if ti.static(layer < len(sizes) - 2):
                total = ti.tanh(total)
            s.assign("policy_layers", starts[layer + 1] + j, total)


def weights_before(policy, layer):
    """Where a layer's weights start in w_policy (tisim.nn's layout)."""
    sizes = policy.network.sizes
    return sum(p * q + q for p, q in zip(sizes[:layer], sizes[1:layer + 1]))


@ti.func
def output(policy: ti.template(), s: ti.template(), j):
    """pi(o[t]) entry j from the stored network output."""
    value = s.scratch("policy_layers", ti.static(units(policy)[1]) + j)
    if ti.static(policy.squashed):
        value = policy.limit * ti.tanh(value)
    return value


@ti.func
def network_reverse(policy: ti.template(), s: ti.template(), bar: ti.template()):
    # dL/d(each unit) accumulates in policy_layers' derivative, from the output down; a hidden unit's value h
    # is tanh of its input, whose derivative is 1 - h^2
    b, w = s.b, ti.static(s.model.P.w_policy)
    sizes, starts, out = ti.static(policy.network.sizes, units(policy)[0], units(policy)[1])
    for j in range(sizes[-1]):
        g = bar.scratch("policy_action", j)
        if ti.static(policy.squashed):
            y = ti.tanh(s.scratch("policy_layers", out + j))
            g *= policy.limit * (1.0 - y * y)
        bar.accumulate("policy_layers", out + j, g)
    for layer in ti.static(range(len(sizes) - 2, -1, -1)):
        a, n = ti.static(sizes[layer], sizes[layer + 1])
        k = ti.static(weights_before(policy, layer))
        for j in range(n):
            g = bar.scratch("policy_layers", starts[layer + 1] + j)
            if ti.static(layer < len(sizes) - 2):
                h = s.scratch("policy_layers", starts[layer + 1] + j)
                g *= 1.0 - h * h
            bar.theta[b, w + k + a * n + j] += g
            for i in range(a):
                bar.theta[b, w + k + i * n + j] += g * s.scratch("policy_layers", starts[layer] + i)
                bar.accumulate("policy_layers", starts[layer] + i, s.theta[b, w + k + i * n + j] * g)


@ti.func
def observe_reverse(policy: ti.template(), s: ti.template(), bar: ti.template()):
    b, t = s.b, s.t
    P = ti.static(s.model.P)
    for r in ti.static(range(len(segments(policy)))):
        kind, first, count, column, width, centre = ti.static(segments(policy)[r])
        for e in range(count):
            value = s.x[b, t, first + e]
            if ti.static(kind == 0):
                bar.x[b, t, first + e] += normalized_reverse(s, bar, P, column + e)
            elif ti.static(kind == 1):
                bar.x[b, t, first + e] += ti.cos(value) * normalized_reverse(s, bar, P, column + 2 * e) \
                    - ti.sin(value) * normalized_reverse(s, bar, P, column + 2 * e + 1)
            elif ti.static(kind == 3):
                phi_bar = normalized_reverse(s, bar, P, column + e)
                bar.x[b, t, first + e] += phi_bar
                bar.accumulate("policy_centre", centre + e % width, phi_bar)
            else:
                omega = ti.static(2 * np.pi * policy.clock[0]) * (e + 1)
                bar.x[b, t, first] += omega * (
                    ti.cos(omega * value) * normalized_reverse(s, bar, P, column + 2 * e)
                    - ti.sin(omega * value) * normalized_reverse(s, bar, P, column + 2 * e + 1))
    for q in ti.static(range(len(policy.centroids))):
        offset, items, width, c = ti.static(policy.centroids[q])
        share = bar.scratch("policy_centre", q) / items
        for j in range(items):
            bar.x[b, t, offset + j * width + c] -= share


@ti.func
def normalized_reverse(s: ti.template(), bar: ti.template(), P: ti.template(), column):
    # z = (phi - mean) / scale: adds dL/dmean and dL/dscale, returns dL/dphi
    phi_bar = bar.scratch("policy_layers", column) / s.theta[s.b, P.obs_scale + column]
    bar.theta[s.b, P.obs_mean + column] -= phi_bar
    bar.theta[s.b, P.obs_scale + column] -= phi_bar * s.scratch("policy_layers", column)
    return phi_bar


@ti.func
def feedback(self, s: ti.template(), i):
    # the first phase of a phased closed loop: the policy's output, once a step, into the scratch the actions read
    # (and the clock's next time)
    feedback_into(self, s)
    if ti.static(self.policy.timed):
        s.advance("clock", 0, s.state("clock") + s.dt)


@ti.func
def feedback_fused(self, s: ti.template(), i):
    # the fused forward pass's form: it sets the clock's next time, as the last phase's fused form sets the rest of
    # the next state, which the engine then does not zero
    feedback_into(self, s)
    if ti.static(self.policy.timed):
        s.set_next("clock", 0, s.state("clock") + s.dt)


@ti.func
def feedback_into(self, s: ti.template()):
    observe_into(self.policy, s)
    network_into(self.policy, s)
    for j in range(self.n_applied):
        s.assign("policy_action", j, output(self.policy, s, j))


@ti.func
def feedback_reverse(self, s: ti.template(), bar: ti.template(), i):
    network_reverse(self.policy, s, bar)
    observe_reverse(self.policy, s, bar)
    if ti.static(self.policy.timed):
        bar.add_state("clock", 0, bar.next_state("clock"))
