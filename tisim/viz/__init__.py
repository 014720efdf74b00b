"""Pictures: 2D drawings and GIFs, 3D scenes, windows and plots. Nothing here simulates.

    raster     a numpy rasterizer: colours, a Canvas in world coordinates, text, GIFs (re-exported here)
    drawings   one drawing per system, the views and cameras that frame a rollout, frames (re-exported here)
    scene      3D pictures with Taichi's GGUI scene (tisim.scene)
    gui        interactive windows for demos run with --gui (tisim.gui)
    plots      matplotlib plots of histories, trajectories and adjoints (tisim.plots)
"""
from tisim.viz.drawings import (
    CAPTION_BAND,
    DRAW,
    HINGE_HEIGHT,
    VIEWS,
    draw_bouncing_ball,
    draw_cartpole,
    draw_double_pendulum,
    draw_mass_spring,
    draw_mpm,
    draw_pendulum,
    draw_rigid2d,
    draw_sliding_block,
    frames,
    look_at_rollout,
    look_at_rollouts,
    orbit,
    rollout_box,
    view_bouncing_ball,
    view_cartpole,
    view_double_pendulum,
    view_mass_spring,
    view_pendulum,
    view_rigid2d,
    view_sliding_block,
)
from tisim.viz.raster import (
    BACKGROUND,
    BALL,
    BLOCK,
    BOB,
    BOB_LOWER,
    CART,
    GROUND,
    HINGE,
    INK,
    MARK,
    MARKER,
    POLE,
    ROD,
    Canvas,
    caption,
    quantize,
    save_gif,
    side_by_side,
    text_mask,
    write,
)
from tisim.viz.scene import fit_camera, project

__all__ = [
    "BACKGROUND", "BALL", "BLOCK", "BOB", "BOB_LOWER", "CAPTION_BAND", "CART", "DRAW", "GROUND", "HINGE",
    "HINGE_HEIGHT", "INK", "MARK", "MARKER", "POLE", "ROD", "VIEWS", "Canvas", "draw_bouncing_ball", "draw_cartpole",
    "draw_double_pendulum", "draw_mass_spring", "draw_mpm", "draw_pendulum", "draw_rigid2d", "draw_sliding_block",
    "caption", "fit_camera", "frames", "look_at_rollout", "look_at_rollouts", "project", "rollout_box", "text_mask",
    "write", "orbit",
    "quantize", "save_gif", "side_by_side", "view_bouncing_ball", "view_cartpole", "view_double_pendulum",
    "view_mass_spring", "view_pendulum", "view_rigid2d", "view_sliding_block",
]
