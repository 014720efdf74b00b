"""MPM's transfers between the points and the grid (tisim/systems/mpm/system.py's scatter and gather phases), in their
three forms:

- per (point, cell) pair, the phases themselves: a single loop each, what the per-step schedule runs forward and
  what Taichi could differentiate (the reverse mode of a point's 27 cells unrolled took minutes to compile in 3D;
  tests/test_mpm.py differentiates the pairs to check the hand-written reverses);
- per point with its 3^d cells unrolled, the fused forward's forms (FUSED): the weights computed once a point, its
  sums kept in registers and regrouped as the reverses' below, so the same trajectory to rounding;
- the hand-written reverses of scatter and gather (REVERSES), per point, which the backward pass runs in place of
  Taichi's reverse mode of the pairs (tests/test_mpm.py compares the two to 1e-12).

A point's weights: with q = n x_p and fx = q - floor(q - 1/2), the cell with digits (d_0, d_1, ...) in base 3 from
the stencil's lower corner weighs N_d0(fx_0) N_d1(fx_1) ..., with N0 = (1.5 - f)^2 / 2, N1 = 0.75 - (f - 1)^2 and
N2 = (f - 0.5)^2 / 2, and lies at d = (digits - fx) / n from the point.
"""
import taichi as ti


def stencil_contraction(values, weights, slopes):
    """At compile time: (sum_o v_o prod_j weights[j][d_j], [sum_o v_o slopes[k][d_k] prod_(j != k) weights[j][d_j]
    for each axis k]) over the cells o = sum_j d_j 3^j of a stencil, values v listed by o. Axis j is summed out of
    every partial sum in turn; the partial sums kept are those with no slope factor yet and those with axis k's,
    one for each axis k done."""
    def contract(part, factors):  # sum out the fastest digit
        return [part[3 * r] * factors[0] + part[3 * r + 1] * factors[1] + part[3 * r + 2] * factors[2]
                for r in range(len(part) // 3)]
    plain, sloped = list(values), []
    for j in range(len(weights)):
        sloped = [contract(part, weights[j]) for part in sloped] + [contract(plain, slopes[j])]
        plain = contract(plain, weights[j])
    return plain[0], [part[0] for part in sloped]


class Transfers:
    """Mixin of MPM: the scatter and gather phases and their fused and reverse forms (read the model's n_grid, dim,
    accessors, mass and stress_of)."""

    FUSED = {"scatter": ("scatter_point", "n_particles"), "gather": ("gather_point", "n_particles")}
    REVERSES = {"scatter": ("scatter_reverse", "n_particles"), "gather": ("gather_reverse", "n_particles")}

    # A stencil item i is one (point, cell) pair: point i // 3^d and the cell whose digits in base 3 are i % 3^d,
    # relative to the lower corner of the point's stencil. Looping over pairs, not over points with an unrolled
    # loop over their 3^d cells inside, keeps every phase a single loop: a 3D kernel unrolled over 27 cells took
    # 5 minutes to compile in reverse mode.
    @ti.func
    def pair(self, s: ti.template(), i):
        """(point p, its stencil's cell index, B-spline weight, x_cell - x_p, last): last = 1 for the pair whose
        cell is the stencil's upper corner, the point's last pair (one pair per point, where per-point terms are
        added once)."""
        p, o = i // 3 ** self.dim, i % 3 ** self.dim
        base, fx, w0, w1, w2 = self.spline(s, p)
        digit = ti.Vector([(o // 3 ** k) % 3 for k in ti.static(range(self.dim))])
        weight, cell = 1.0, 0
        for k in ti.static(range(self.dim)):
            weight *= ti.select(digit[k] == 0, w0[k], ti.select(digit[k] == 1, w1[k], w2[k]))
            cell += ti.min(ti.max(base[k] + digit[k], 0), self.n_grid - 1) * self.n_grid ** k
        d = (ti.cast(digit, float) - fx) / self.n_grid
        return p, cell, weight, d, ti.select(o == 3 ** self.dim - 1, 1.0, 0.0)

    @ti.func
    def spline(self, s: ti.template(), p):
        """Point p's stencil: its lower corner cell (digits), the offset fx from it in cells, and the quadratic
        B-spline's three weights per axis (vectors over the axes)."""
        q = s.state("pos", p) * self.n_grid
        base = ti.cast(q - 0.5, ti.i32)
        fx = q - ti.cast(base, float)
        return base, fx, 0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2

    @ti.func
    def corner(self, base, w0, w1, w2, o: ti.template()):
        """(cell index, weight) of point's stencil cell o (a compile-time number), as pair(); the cell's offset
        (digits - fx) / n enters the sums split, through digit_sum and add_by_digits."""
        weight, cell = 1.0, 0
        for k in ti.static(range(self.dim)):
            digit = ti.static((o // 3 ** k) % 3)
            weight *= (w0, w1, w2)[digit][k]
            cell += ti.min(ti.max(base[k] + digit, 0), self.n_grid - 1) * self.n_grid ** k
        return cell, weight

    @ti.func
    def scatter(self, s: ti.template(), i):
        p, cell, weight, d, _ = self.pair(s, i)
        m = self.mass(s, p)
        s.accumulate("grid_mass", cell, weight * m)
        momentum = m * s.state("vel", p) + s.scratch("affine", p) @ d
        s.accumulate("grid_momentum", cell, weight * momentum)

    @ti.func
    def gather(self, s: ti.template(), i):
        p, cell, weight, d, last = self.pair(s, i)
        v = weight * ti.exp(-s.dt * s.param("drag")) * s.scratch("grid_velocity", cell)
        s.advance("vel", p, v)
        s.advance("C", p, (4.0 * self.n_grid ** 2) * v.outer_product(d))
        # x_p after the increments (two adds): added first, x_p ~ 0.5 rounded the small increments of a slow motion
        # away in float32 (a block gliding at 1 mm/s lost 15% of its motion in 3D)
        s.advance("pos", p, s.dt * v)
        s.advance("pos", p, last * s.state("pos", p))
        s.advance("F", p, last * s.scratch("deformation", p))

    # ---- the fused forward's forms of scatter and gather (tisim/core/phases.py, FUSED) ------------------------------
    # Per point, its 3^d cells unrolled: the weights computed once a point and its sums kept in registers. Each
    # cell's offset d = (digits - fx) / n is split as in the reverses below, the point's part fx applied once a
    # point and the digits, constants once unrolled, in adds: the pairs' sums, regrouped, so the same trajectory to
    # rounding (tests/test_mpm.py). Forward only: in reverse
    # mode the unrolled 3D form took minutes to compile.
    @ti.func
    def scatter_point(self, s: ti.template(), p):
        base, fx, w0, w1, w2 = self.spline(s, p)
        # the point's stress phase too (its fused form is empty), into the scratch that the gather and the backward
        # pass read, and read back while in cache
        self.stress_of(s, p, True)
        m, vel, affine = self.mass(s, p), s.state("vel", p), s.scratch("affine", p)
        pushed = m * vel - affine @ fx / self.n_grid
        columns = [ti.Vector([affine[j, k] for j in ti.static(range(self.dim))]) / self.n_grid
                   for k in ti.static(range(self.dim))]
        for o in ti.static(range(3 ** self.dim)):
            cell, weight = self.corner(base, w0, w1, w2, o)
            s.accumulate("grid_mass", cell, weight * m)
            s.accumulate("grid_momentum", cell, weight * (pushed + self.digit_sum(columns, o)))

    @ti.func
    def gather_point(self, s: ti.template(), p):
        base, fx, w0, w1, w2 = self.spline(s, p)
        damping = ti.exp(-s.dt * s.param("drag"))
        vel = ti.Vector.zero(float, self.dim)
        # C' = 4 n^2 sum_i v_i d_i^T = 4 n (sum_i v_i digits_i^T - v fx^T): by_digits[k] is the former's column k
        by_digits = [ti.Vector.zero(float, self.dim) for _ in ti.static(range(self.dim))]
        for o in ti.static(range(3 ** self.dim)):
            cell, weight = self.corner(base, w0, w1, w2, o)
            v = weight * s.scratch("grid_velocity", cell)
            vel += v
            self.add_by_digits(by_digits, v, o)
        vel *= damping
        C = (4.0 * self.n_grid) * (damping * ti.Matrix.cols(by_digits) - vel.outer_product(fx))
        s.set_next("vel", p, vel)
        s.set_next("C", p, C)
        s.set_next("pos", p, s.dt * vel + s.state("pos", p))
        s.set_next("F", p, s.scratch("deformation", p))

    # ---- the hand-written reverses of scatter and gather (tisim/core/phases.py, REVERSES) ---------------------------
    # Per point with its cells unrolled, as the fused forms. With q = n x_p and fx = q - floor(q - 1/2), a cell's
    # weight is N_d0(fx_0) N_d1(fx_1) ... and its offset d = (digits - fx) / n, so dd/dx_p = -I and
    # dw/dx_p,k = n N'_dk(fx_k) times the other axes' factors (N0' = fx - 1.5, N1' = -2 (fx - 1), N2' = fx - 0.5).
    @ti.func
    def weighted_sums(self, values: ti.template(), fx, w0, w1, w2):
        """(sum_o values[o] w_o, sum_o values[o] dw_o/dx_p) over the point's stencil cells o, for a vector of one
        value a cell: the product weights contracted one axis at a time, as a tensor product's are, where each
        cell's gradient on its own costs a product of d factors an axis."""
        slopes = (fx - 1.5, -2.0 * (fx - 1.0), fx - 0.5)
        # ti.static: the contraction is Python run at compile time on the expressions, as an unrolled loop is
        total, gradient = ti.static(stencil_contraction(
            [values[o] for o in ti.static(range(3 ** self.dim))],
            [[(w0, w1, w2)[d][j] for d in ti.static(range(3))] for j in ti.static(range(self.dim))],
            [[slopes[d][j] for d in ti.static(range(3))] for j in ti.static(range(self.dim))]))
        return total, ti.Vector(gradient) * self.n_grid

    @ti.func
    def digit_sum(self, columns: ti.template(), o: ti.template()):
        """sum_k digit_k columns[k] over the axes, for stencil cell o's digits (0, 1 or 2, known at compile time):
        M digits for the matrix M of the columns, in adds alone."""
        total = ti.Vector.zero(float, self.dim)
        for k in ti.static(range(self.dim)):
            if ti.static((o // 3 ** k) % 3 == 1):
                total += columns[k]
            if ti.static((o // 3 ** k) % 3 == 2):
                total += 2.0 * columns[k]
        return total

    @ti.func
    def add_by_digits(self, columns: ti.template(), v, o: ti.template()):
        """columns[k] += digit_k v over the axes, for stencil cell o's digits: summed over the cells, the columns of
        sum_i v_i digits_i^T, in adds alone (digit_sum's transpose)."""
        for k in ti.static(range(self.dim)):
            if ti.static((o // 3 ** k) % 3 == 1):
                columns[k] += v
            if ti.static((o // 3 ** k) % 3 == 2):
                columns[k] += 2.0 * v

    # Both reverses split the offset d = (digits - fx) / n of each cell into the point's part fx, whose terms are
    # summed once a point, and the digits, which are constants once unrolled: a matrix times d costs a few adds a
    # cell, where the matrix products were half of the reverses' arithmetic.
    @ti.func
    def scatter_reverse(self, s: ti.template(), bar: ti.template(), p):
        base, fx, w0, w1, w2 = self.spline(s, p)
        m, vel, affine = self.mass(s, p), s.state("vel", p), s.scratch("affine", p)
        pushed = m * vel - affine @ fx / self.n_grid  # a cell's momentum per weight is pushed + A digits / n
        columns = [ti.Vector([affine[j, k] for j in ti.static(range(self.dim))]) / self.n_grid
                   for k in ti.static(range(self.dim))]
        # sums over the cells of w mass_bar, w momentum_bar and w momentum_bar digits^T (by columns)
        mass_sum, momentum_sum = 0.0, ti.Vector.zero(float, self.dim)
        by_digits = [ti.Vector.zero(float, self.dim) for _ in ti.static(range(self.dim))]
        weight_bars = ti.Vector.zero(float, 3 ** self.dim)
        for o in ti.static(range(3 ** self.dim)):
            cell, weight = self.corner(base, w0, w1, w2, o)
            mass_bar, momentum_bar = bar.scratch("grid_mass", cell), bar.scratch("grid_momentum", cell)
            weight_bars[o] = mass_bar * m + momentum_bar.dot(pushed + self.digit_sum(columns, o))
            mass_sum += weight * mass_bar
            momentum_sum += weight * momentum_bar
            self.add_by_digits(by_digits, weight * momentum_bar, o)
        _, x_bar = self.weighted_sums(weight_bars, fx, w0, w1, w2)
        bar.add_state("pos", p, x_bar - affine.transpose() @ momentum_sum)
        bar.add_state("vel", p, m * momentum_sum)
        bar.accumulate("affine", p, (ti.Matrix.cols(by_digits) - momentum_sum.outer_product(fx)) / self.n_grid)
        bar.add_param("rho", self.group_of[p], (mass_sum + vel.dot(momentum_sum)) * self.volume)

    @ti.func
    def gather_reverse(self, s: ti.template(), bar: ti.template(), p):
        dt = s.dt
        base, fx, w0, w1, w2 = self.spline(s, p)
        damping = ti.exp(-dt * s.param("drag"))
        vel_bar, C_bar = bar.next_state("vel", p), bar.next_state("C", p)
        pos_bar = bar.next_state("pos", p)
        scale = 4.0 * self.n_grid ** 2
        # a cell's v_bar: vel_bar + dt pos_bar + scale C_bar d = pulled + scale C_bar digits / n
        pulled = vel_bar + dt * pos_bar - (scale / self.n_grid) * (C_bar @ fx)
        columns = [ti.Vector([C_bar[j, k] for j in ti.static(range(self.dim))]) * (scale / self.n_grid)
                   for k in ti.static(range(self.dim))]
        gathered, alongs = ti.Vector.zero(float, self.dim), ti.Vector.zero(float, 3 ** self.dim)  # gathered: sum w v
        for o in ti.static(range(3 ** self.dim)):
            cell, weight = self.corner(base, w0, w1, w2, o)
            grid_v = s.scratch("grid_velocity", cell)
            v_bar = pulled + self.digit_sum(columns, o)
            bar.accumulate("grid_velocity", cell, weight * damping * v_bar)
            alongs[o] = grid_v.dot(v_bar)
            gathered += weight * grid_v
        damping_bar, x_bar = self.weighted_sums(alongs, fx, w0, w1, w2)
        # dd/dx_p = -I, and the cells' terms scale w damping C_bar^T v_cell sum to scale damping C_bar^T gathered
        bar.add_state("pos", p, pos_bar + damping * x_bar - scale * damping * (C_bar.transpose() @ gathered))
        bar.add_param("drag", 0, -dt * damping * damping_bar)
        bar.accumulate("deformation", p, bar.next_state("F", p))
