"""MassSpring's step written item-wise, the referee of its phased step in the tests.

Each particle evaluates its own springs from the padded incidence table (so every spring twice) and moves, in one
branch-free loop that Taichi's reverse mode differentiates: no scratch, no fused forms, no hand-written reverses.
MassSpring's phases, their fused forward pass and their reverses must give the same rollouts and gradients."""
import taichi as ti

from tisim.systems.mass_spring import MassSpring


class ItemwiseMassSpring(MassSpring):
    """MassSpring with one update per particle (ITEMS) in place of its phases."""

    PHASES = ()
    FUSED = {}
    REVERSES = {}
    SCRATCH = ()
    ITEMS = "n_particles"

    # It runs inside a dynamic loop over particles, so everything it uses is read here: a local set before that loop
    # and read in it gets silently wrong gradients (docs/taichi_pitfalls.md#locals-across-a-dynamic-loop).
    @ti.func
    def step_item(self, x: ti.template(), theta: ti.template(), u: ti.template(), dt, b, t, i):
        f = self.weight(theta, b)
        for q in ti.static(range(self.degree)):
            f += self.present[i, q] * self.spring_force(x, theta, u, b, t, self.spring_of[i, q], i,
                                                        self.other_of[i, q])
        self.move(x, theta, dt, b, t, i, f, False)
