"""Physical laws as pure Taichi functions, shared by the systems.

    integrators       semi-implicit Euler, ballistic steps
    contact           penalty normal forces, friction laws, restitution
    complementarity   hard contact as a small convex problem solved inside the step
    rotations         quaternions for bodies that turn in 3D, with their reverses
"""
