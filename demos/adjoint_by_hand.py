# The discrete adjoint, small enough to follow by hand.
#
# System: x[t+1] = a x[t] + theta  (ScalarLinear, a = 0.9, theta = 1, x[0] = 0), loss L = (x[T] - x*)^2, x* = 2.
# The backward pass runs the adjoint recursion
#     lambda_T = dL/dx_T = 2 (x_T - x*),    lambda_t = a lambda_{t+1},
# and since theta enters every step with coefficient 1,
#     dL/dtheta = lambda_1 + ... + lambda_T = 2 (x_T - x*) (1 + a + ... + a^(T-1)),    dL/dx_0 = lambda_0.
# The lambdas printed below come from tisim's backward pass (g.adjoint); the closed form and a central finite
# difference stand beside them as the check.
#
# Command: python demos/adjoint_by_hand.py [--horizon 8]
import argparse

import numpy as np

import tisim

A, THETA, X0, TARGET = 0.9, 1.0, 0.0, 2.0


def central_difference(sim, h=1e-5):
    """dL/dtheta from two rollouts at theta +- h (L is quadratic in theta, so only round-off remains)."""
    losses = []
    for theta in (THETA + h, THETA - h):
        sim.set_params(theta=theta)
        losses.append((sim.rollout()["x"][0, -1] - TARGET) ** 2)
    sim.set_params(theta=THETA)
    return (losses[0] - losses[1]) / (2 * h)


def print_sweep(x, lam, running, closed):
    print(f"{'t':>3} {'x_t':>12} {'lambda_t (backward)':>20} {'2(x_T-x*)a^(T-t)':>18} {'sum_{s>=t} lambda_s':>20}")
    for t in range(len(x) - 1, -1, -1):
        print(f"{t:>3} {x[t]:>12.6f} {lam[t]:>20.10f} {closed[t]:>18.10f} {running[t]:>20.10f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "The discrete adjoint of x[t+1] = a x[t] + theta worked by hand, step by step, beside what tisim's backward "
        "pass gives and the closed form: prints the table, writes nothing."))
    parser.add_argument("--horizon", type=int, default=3, help="number of steps T (default 3)")
    T = parser.parse_args(argv).horizon

    sim = tisim.systems.ScalarLinear(horizon=T, batch=1, a=A, theta=THETA, x=X0)
    g = sim.gradient(tisim.losses.TerminalTarget({"x": TARGET}))
    x = sim.rollout()["x"][0]
    lam = g.adjoint["x"][0]
    # dL/dtheta collects lambda_s for every step s >= 1 that theta drives; the sweep adds them from T downwards.
    running = np.array([lam[max(t, 1):].sum() for t in range(T + 1)])
    closed_lambda = 2 * (x[T] - TARGET) * A ** (T - np.arange(T + 1))
    closed_dtheta = 2 * (x[T] - TARGET) * sum(A ** k for k in range(T))
    fd_dtheta = central_difference(sim)

    print(f"forward   x[t+1] = {A} x[t] + {THETA}:  x = {np.round(x, 10).tolist()}")
    print(f"loss      L = (x_T - {TARGET})^2 = {g.value:.10g}")
    print("backward  lambda_t = dL/dx_t, swept from t = T down to 0")
    print_sweep(x, lam, running, closed_lambda)
    print(f"dL/dx_0    lambda_0, backward pass           = {lam[0]:.10g}")
    print(f"dL/dtheta  backward pass                     = {g.params['theta'][0]:.10g}")
    print(f"           closed form 2(x_T-x*) sum_k<T a^k = {closed_dtheta:.10g}")
    print(f"           central difference, two rollouts  = {fd_dtheta:.10g}")
    return dict(x=x, loss=g.value, adjoint=lam, running_sum=running, closed_form_adjoint=closed_lambda,
                dL_dx0=g.initial_state["x"][0], dL_dtheta=g.params["theta"][0], closed_form_dtheta=closed_dtheta,
                central_difference_dtheta=fd_dtheta)


if __name__ == "__main__":
    main()
