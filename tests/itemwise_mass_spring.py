"""MassSpring's step written item-wise, the referee of its phased step in the tests.

Each particle evaluates its own springs from the padded incidence table (so every spring twice) and moves, in one
branch-free loop that Taichi's reverse mode differentiates: no scratch, no fused forms, no hand-written reverses.
MassSpring's phases, their fused forward pass and their reverses must give the same rollouts and gradients."""
import taichi as ti

from tisim.systems.mass_spring import MassSpring


class ItemwiseMassSpring(MassSpring):
    """MassSpring with a plain step, a loop over particles, in place of its phases."""

    PHASES = ()
    FUSED = {}
    REVERSES = {}
    SCRATCH = ()

    # The body of the dynamic loop over particles reads everything it uses itself: a local set before that loop and
    # read in it gets silently wrong gradients (docs/taichi_pitfalls.md#locals-across-a-dynamic-loop).
    @ti.func
    def step(self, s: ti.template()):
        for i in range(self.n_particles):
            f = self.weight(s)
            for q in ti.static(range(self.degree)):
                f += self.present[i, q] * self.spring_force(s, self.spring_of[i, q], i, self.other_of[i, q])
            self.move(s, i, f, False)
