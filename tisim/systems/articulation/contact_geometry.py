"""Where two shapes touch, as geometry: the nearest points of two segments, a point's distance from a box, and the
points where a capsule or a box presses into a box, each with its normal and depth. Written on scalars as the
dynamics is (numpy's floats or Taichi's expressions, through ops), branch-free: a point that does not apply is
given a negative depth, which no contact law pushes on."""
from tisim.systems.articulation.algebra import add, bind, dot, matmul, matvec, mul, scale, sub, total


def pick(ops, condition, a, b):
    """a where the condition holds, else b: scalars, or nested tuples of them alike."""
    if isinstance(a, tuple):
        return tuple(pick(ops, condition, x, y) for x, y in zip(a, b))
    return ops.select(condition, a, b)


def magnitude(x, ops):
    return ops.max(x, -x)


def sign_of(x, ops):
    return ops.select(x >= 0.0, 1.0, -1.0)


def columns(axes):
    return [(axes[0][k], axes[1][k], axes[2][k]) for k in range(3)]


def total_vector(vectors, ops):
    out = vectors[0]
    for v in vectors[1:]:
        out = add(out, v)
    return out


def closest_points(start_a, axis_a, start_b, axis_b, lengths, ops):
    """The points of two segments (start + s axis, s in [0, 1]; axis None: the point start) nearest each other,
    `lengths` the squared lengths of the axes: each parameter minimizes the distance given the other's, clamped to
    the segment (the first's unclamped, the second's from it, then the first's again), which for this convex
    quadratic on a square is the nearest pair."""
    r = sub(start_a, start_b)
    s = t = 0.0
    a, e = lengths
    if axis_a is not None and axis_b is not None:
        b = ops.bind(dot(axis_a, axis_b))
        c, f = ops.bind(dot(axis_a, r)), ops.bind(dot(axis_b, r))
        across = ops.max(a * e - b * b, 1e-12 * a * e)  # parallel axes: any pair along the overlap is nearest
        s = ops.bind(ops.clamp((b * f - c * e) / across, 0.0, 1.0))
        t = ops.bind(ops.clamp((b * s + f) / e, 0.0, 1.0))
        s = ops.bind(ops.clamp((b * t - c) / a, 0.0, 1.0))
    elif axis_b is not None:
        t = ops.bind(ops.clamp(dot(axis_b, r) / e, 0.0, 1.0))
    elif axis_a is not None:
        s = ops.bind(ops.clamp(-dot(axis_a, r) / a, 0.0, 1.0))
    on_a = start_a if axis_a is None else add(start_a, scale(s, axis_a))
    on_b = start_b if axis_b is None else add(start_b, scale(t, axis_b))
    return bind(ops, on_a), bind(ops, on_b)


def box_distance(local, half_widths, ops):
    """(signed distance, outward unit normal) of a point `local` (in the box's frame) from a box of half_widths
    about its centre: outside, the distance to the nearest point of the box; inside, minus the distance to the
    nearest face, the normal that face's."""
    sign = [sign_of(c, ops) for c in local]
    beyond = [ops.bind(magnitude(c, ops) - h) for c, h in zip(local, half_widths)]  # |c| - h: > 0 outside that slab
    out = [ops.bind(ops.max(q, 0.0)) for q in beyond]
    squared = ops.bind(dot(out, out))
    outside = ops.bind(ops.sqrt(ops.max(squared, 1e-60)))
    deepest = ops.max(beyond[0], ops.max(beyond[1], beyond[2]))
    first = beyond[0] >= ops.max(beyond[1], beyond[2])
    second = beyond[1] >= beyond[2]
    face = (ops.select(first, sign[0], 0.0), ops.select(first, 0.0, ops.select(second, sign[1], 0.0)),
            ops.select(first, 0.0, ops.select(second, 0.0, sign[2])))
    isout = squared > 0.0
    normal = tuple(ops.bind(ops.select(isout, s * o / outside, f)) for s, o, f in zip(sign, out, face))
    return ops.bind(ops.select(isout, outside, deepest)), normal


def box_in_world(body, pos, rotation, half_widths, R, x, ops):
    """(centre, axes, half-widths) of a box placed at pos and turned by rotation in its body's frame: the axes in
    the world as the columns of a matrix."""
    return bind(ops, add(x[body], matvec(R[body], pos))), bind(ops, matmul(R[body], rotation)), half_widths


def in_box(point, centre, axes, ops):
    """The coordinates of a world point along a box's axes, from its centre."""
    offset = sub(point, centre)
    return tuple(ops.bind(total(mul(axes[i][k], offset[i]) for i in range(3))) for k in range(3))


def capsule_box_points(start, axis, length, r, box, ops):
    """The points (n, y, depth) where a capsule presses into a box: n the box's outward normal (towards the
    capsule), y midway between the two surfaces, depth how far they overlap there (negative: not touching). The
    capsule is its axis (start + s axis, s in [0, 1], of squared length `length`, a constant) widened by r; the
    box is (centre, axes, half-widths) as box_in_world gives them. The points are found on the axis:

    - Over a face: for each pair of opposite faces, the stretch of the axis over them (the axis clipped to the
      slabs of the other two axes) touches at its two ends, each along the normal of the face it is over, its
      depth the radius less its height above that face. A capsule lying on a face rests on its two ends; one
      lying across a narrow box, on the two points above the edges it crosses; one hanging over an edge, on its
      end on the face and the point above the edge.
    - Beside an edge: where the axis comes nearest an edge of the box (or a corner) from outside both faces that
      meet there, it touches along the line between the two nearest points, its depth the radius less their
      distance. An end of the stretch over a face that lies on such an edge's border is left out then: the
      two are the same point as the axis tips over the edge, so the force passes from one to the other
      continuously.
    An axis that enters the box (a capsule pressed in deeper than its radius) is beyond these laws."""
    centre, axes, h = box
    column = columns(axes)
    points = []

    # beside an edge: the edge along axis j at the signs (sa, sb) of the other two axes a < b
    beside = {}
    for j in range(3):
        a_, b_ = [i for i in range(3) if i != j]
        for sa in (-1.0, 1.0):
            for sb in (-1.0, 1.0):
                middle = add(centre, add(scale(sa * h[a_], column[a_]), scale(sb * h[b_], column[b_])))
                edge_start = sub(middle, scale(h[j], column[j]))
                on_axis, on_edge = closest_points(start, axis, edge_start, scale(2.0 * h[j], column[j]),
                                                  (length, 4.0 * h[j] * h[j]), ops)
                local = in_box(on_axis, centre, axes, ops)
                outside = (sa * local[a_] > h[a_]) & (sb * local[b_] > h[b_])
                if j > 0:  # a corner's outside is left to the edges along the first axis
                    outside = outside & (magnitude(local[j], ops) <= h[j])
                beside[j, sa, sb] = ops.bind(ops.select(outside, 1.0, 0.0))
                gap = sub(on_axis, on_edge)
                distance = ops.bind(ops.sqrt(ops.max(dot(gap, gap), 1e-30)))
                n = bind(ops, scale(1.0 / distance, gap))
                depth = ops.bind(ops.select(outside, r - distance, -1.0))
                points.append((n, bind(ops, scale(0.5, add(sub(on_axis, scale(r, n)), on_edge))), depth))

    def edge_taken(k, sigma, i, tau):
        """Whether the edge between face (k, sigma) and face (i, tau) has its own contact (sigma, tau runtime)."""
        j = 3 - k - i
        signs = {}
        for s_k in (-1.0, 1.0):
            for s_i in (-1.0, 1.0):
                signs[s_k, s_i] = beside[(j, s_k, s_i) if k < i else (j, s_i, s_k)]
        plus_k = ops.select(tau > 0.0, signs[1.0, 1.0], signs[1.0, -1.0])
        minus_k = ops.select(tau > 0.0, signs[-1.0, 1.0], signs[-1.0, -1.0])
        return ops.select(sigma > 0.0, plus_k, minus_k)

    # over a face: the axis (start + s axis) clipped to the slab |local_i| <= h_i of each axis i
    first = in_box(start, centre, axes, ops)
    along = tuple(ops.bind(total(mul(axes[i][k], axis[i]) for i in range(3))) for k in range(3))
    tiny = 1e-12 * length ** 0.5
    enter, leave, tau_in = [], [], []
    for i in range(3):
        rate = ops.bind(ops.select(along[i] >= 0.0, ops.max(along[i], tiny), -ops.max(-along[i], tiny)))
        sign = ops.bind(ops.select(rate > 0.0, 1.0, -1.0))  # the side of the slab the axis leaves by
        enter.append(ops.bind((-sign * h[i] - first[i]) / rate))
        leave.append(ops.bind((sign * h[i] - first[i]) / rate))
        tau_in.append(-sign)
    for k in range(3):
        i, j = [m for m in range(3) if m != k]
        low = ops.bind(ops.max(0.0, ops.max(enter[i], enter[j])))
        high = ops.bind(-ops.max(-1.0, ops.max(-leave[i], -leave[j])))
        # each end of the stretch: its parameter, and the side of slab i or j whose border it lies on
        for s, by_i, tau_i, tau_j in ((low, enter[i] >= enter[j], tau_in[i], tau_in[j]),
                                      (high, leave[i] <= leave[j], -tau_in[i], -tau_in[j])):
            local = tuple(ops.bind(first[m] + s * along[m]) for m in range(3))
            sigma = ops.bind(sign_of(local[k], ops))
            height = ops.bind(sigma * local[k] - h[k])
            over = (low <= high) & (height >= magnitude(local[i], ops) - h[i]) & \
                (height >= magnitude(local[j], ops) - h[j])
            at_end = (s <= 0.0) | (s >= 1.0)
            taken = ops.select(at_end, 0.0, ops.select(by_i, edge_taken(k, sigma, i, tau_i),
                                                       edge_taken(k, sigma, j, tau_j)))
            n = bind(ops, scale(sigma, column[k]))
            point = add(start, scale(s, axis))
            depth = ops.bind(ops.select(over & (taken < 0.5), r - height, -1.0))
            points.append((n, bind(ops, sub(point, scale(0.5 * (r + height), n))), depth))
    return points


def box_box_points(first, second, ops):
    """The points (n, y, depth) where two boxes press into each other: n the normal towards the first box, y midway
    between the two surfaces, depth how far they overlap there (negative: not touching). Each box is (centre,
    axes, half-widths) as box_in_world gives them.

    The direction the boxes overlap least along, among the fifteen that separate two boxes that do not touch (the
    six face normals, and the nine cross products of an edge of one box with an edge of the other), decides:
    - a face normal (preferred while an edge's direction does no better by 5%): that face is the reference, the
      other box's face turned most against it the incident face, and the points are the corners of the two faces'
      overlap seen along the normal (the incident face's corners over the reference face, the reference face's
      corners under the incident face, and where their edges cross), each as deep as the incident face lies below
      the reference face's plane there. A box on a face rests on its four corners; a box across a narrow one on
      the four corners of their overlap; a box hanging over an edge on its two corners on the face and the two
      points above the edge.
    - an edge's direction: the two edges that lead along it meet at one point, as deep as the overlap."""
    (c_a, axes_a, h_a), (c_b, axes_b, h_b) = first, second
    col_a, col_b = columns(axes_a), columns(axes_b)
    d = bind(ops, sub(c_a, c_b))  # from the second box's centre to the first's
    size = [[ops.bind(magnitude(dot(col_a[i], col_b[j]), ops)) for j in range(3)] for i in range(3)]

    # the face normal they overlap least along: (overlap, on the second box?, its axis, the normal's sign)
    best = None
    for second in (1.0, 0.0):
        towards = d if second else scale(-1.0, d)  # from the face's box to the other
        for k in range(3):
            along = ops.bind(dot(towards, (col_b if second else col_a)[k]))
            reach = total(mul((h_a if second else h_b)[m], size[m][k] if second else size[k][m]) for m in range(3))
            option = (ops.bind(reach + (h_b if second else h_a)[k] - magnitude(along, ops)), second, float(k),
                      sign_of(along, ops))
            best = bind(ops, option if best is None else pick(ops, option[0] < best[0], option, best))
    face_overlap, second, k, sign = best
    on_second = second > 0.5

    def chosen(values):
        """The value of `values` (one for each axis) at the chosen axis k."""
        return pick(ops, k < 0.5, values[0], pick(ops, k < 1.5, values[1], values[2]))
    col_r = [bind(ops, pick(ops, on_second, b_, a_)) for a_, b_ in zip(col_a, col_b)]
    h_r = bind(ops, pick(ops, on_second, tuple(h_b), tuple(h_a)))
    n = bind(ops, scale(sign, chosen(col_r)))  # out of the reference face, towards the incident box
    centre_r = bind(ops, add(pick(ops, on_second, c_b, c_a), scale(chosen(h_r), n)))
    t1, t2 = bind(ops, chosen((col_r[1], col_r[2], col_r[0]))), bind(ops, chosen((col_r[2], col_r[0], col_r[1])))
    w1, w2 = ops.bind(chosen((h_r[1], h_r[2], h_r[0]))), ops.bind(chosen((h_r[2], h_r[0], h_r[1])))
    c_i = pick(ops, on_second, c_a, c_b)
    col_i = [bind(ops, pick(ops, on_second, a_, b_)) for a_, b_ in zip(col_a, col_b)]
    h_i = bind(ops, pick(ops, on_second, tuple(h_a), tuple(h_b)))
    towards_first = ops.select(on_second, 1.0, -1.0)

    # the incident face: the incident box's face turned most against the normal
    incident = None
    for m in range(3):
        along = ops.bind(dot(n, col_i[m]))
        normal = scale(-sign_of(along, ops), col_i[m])
        i, j = [q for q in range(3) if q != m]
        option = (magnitude(along, ops), normal, add(c_i, scale(h_i[m], normal)), col_i[i], col_i[j], h_i[i], h_i[j])
        incident = bind(ops, option if incident is None else pick(ops, option[0] > incident[0], option, incident))
    _, n_i, centre_i, s1, s2, g1, g2 = incident

    # the edge direction they overlap least along: (overlap, normal towards the first box, the edges' axes)
    edge = None
    for i in range(3):
        for j in range(3):
            cross = (col_a[i][1] * col_b[j][2] - col_a[i][2] * col_b[j][1],
                     col_a[i][2] * col_b[j][0] - col_a[i][0] * col_b[j][2],
                     col_a[i][0] * col_b[j][1] - col_a[i][1] * col_b[j][0])
            norm = ops.bind(ops.sqrt(ops.max(dot(cross, cross), 1e-24)))
            u = bind(ops, scale(1.0 / norm, cross))
            along = ops.bind(dot(d, u))
            reach = total(h_a[m] * magnitude(dot(u, col_a[m]), ops) + h_b[m] * magnitude(dot(u, col_b[m]), ops)
                          for m in range(3))
            # parallel edges have no direction of their own: one of the faces' serves
            option = (ops.select(norm > 1e-6, reach - magnitude(along, ops), 1e30), scale(sign_of(along, ops), u),
                      float(i), float(j))
            edge = bind(ops, option if edge is None else pick(ops, option[0] < edge[0], option, edge))
    edge_overlap, n_e, i, j = edge
    # the edges that lead: through the first box's corner furthest against n_e, along a_i, and the second's corner
    # furthest along n_e, along b_j
    signs_a = [ops.bind(sign_of(dot(n_e, col_a[m]), ops)) for m in range(3)]
    signs_b = [ops.bind(sign_of(dot(n_e, col_b[m]), ops)) for m in range(3)]
    start_a = bind(ops, sub(c_a, total_vector([scale(signs_a[m] * h_a[m], col_a[m]) for m in range(3)], ops)))
    start_b = bind(ops, add(c_b, total_vector([scale(signs_b[m] * h_b[m], col_b[m]) for m in range(3)], ops)))

    def at_axis(index, values):
        return pick(ops, index < 0.5, values[0], pick(ops, index < 1.5, values[1], values[2]))
    axis_a = bind(ops, at_axis(i, [scale(2.0 * signs_a[m] * h_a[m], col_a[m]) for m in range(3)]))
    axis_b = bind(ops, at_axis(j, [scale(-2.0 * signs_b[m] * h_b[m], col_b[m]) for m in range(3)]))
    length_a = ops.bind(at_axis(i, [4.0 * h * h for h in h_a]))
    length_b = ops.bind(at_axis(j, [4.0 * h * h for h in h_b]))
    on_edges = edge_overlap < 0.95 * face_overlap - 1e-9 * magnitude(face_overlap, ops)
    on_faces = ops.bind(ops.select(on_edges, 0.0, 1.0))

    points = []
    n_first = bind(ops, scale(towards_first, n))

    def press(at, height, inside):
        """A point of the overlap at `at`, `height` above the reference face's plane (negative: below it)."""
        depth = ops.select(inside & (on_faces > 0.5), -height, -1.0)
        points.append((n_first, bind(ops, sub(at, scale(0.5 * height, n))), ops.bind(depth)))

    def over_reference(at):
        offset = sub(at, centre_r)
        return ops.bind(dot(offset, t1)), ops.bind(dot(offset, t2)), ops.bind(dot(offset, n))

    corners = [bind(ops, add(centre_i, add(scale(a * g1, s1), scale(b * g2, s2))))
               for a, b in ((-1.0, -1.0), (1.0, -1.0), (1.0, 1.0), (-1.0, 1.0))]
    seen = [over_reference(corner) for corner in corners]
    # the incident face's edges clipped to the reference face (widened by 1e-12 m, so that a corner on its border
    # counts once): each edge's stretch over the face starts at its first corner or where it enters, and ends where
    # it leaves (its second corner is the next edge's first)
    for e in range(4):
        (u0, v0, height0), (u1, v1, height1) = seen[e], seen[(e + 1) % 4]
        low, high = 0.0, 1.0
        for start, change, half in ((u0, u1 - u0, w1), (v0, v1 - v0, w2)):
            rate = ops.bind(ops.select(change >= 0.0, ops.max(change, 1e-30), -ops.max(-change, 1e-30)))
            towards = ops.select(rate > 0.0, 1.0, -1.0)
            low = ops.max(low, (-towards * (half + 1e-12) - start) / rate)
            high = -ops.max(-high, -(towards * (half + 1e-12) - start) / rate)
        low, high = ops.bind(low), ops.bind(high)
        for t, inside in ((low, low <= high), (high, (high > low + 1e-9) & (high < 1.0 - 1e-9))):
            at = bind(ops, add(corners[e], scale(t, sub(corners[(e + 1) % 4], corners[e]))))
            press(at, ops.bind(height0 + t * (height1 - height0)), inside)
    facing = ops.bind(dot(n_i, n))  # at most -1/sqrt(3): the incident face turns against the normal
    for a, b in ((-1.0, -1.0), (1.0, -1.0), (1.0, 1.0), (-1.0, 1.0)):  # the reference's corners under the incident
        corner = add(centre_r, add(scale(a * w1, t1), scale(b * w2, t2)))
        height = ops.bind(dot(n_i, sub(centre_i, corner)) / facing)
        on_incident = bind(ops, add(corner, scale(height, n)))
        offset = bind(ops, sub(on_incident, centre_i))
        inside = (magnitude(dot(offset, s1), ops) < g1 - 1e-12) & (magnitude(dot(offset, s2), ops) < g2 - 1e-12)
        press(on_incident, height, inside)

    on_a, on_b = closest_points(start_a, axis_a, start_b, axis_b, (length_a, length_b), ops)
    y = bind(ops, scale(0.5, add(on_a, on_b)))
    points.append((bind(ops, n_e), y, ops.bind(ops.select(on_edges, edge_overlap, -1.0))))
    return points

