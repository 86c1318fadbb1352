#!/usr/bin/python3
"""PyTorch peer of bench/splat_bench.cpp: the same 3DGS forward (projection with SH degree 3,
EWA conics, 3-sigma radii, 16x16 tile binning, per-tile depth sort, front-to-back compositing
with the 0.99 / 1/255 / 1e-4 constants) written with torch ops, and its backward by torch
autograd. Each tile's compositing is vectorized: alpha [pixels, gaussians], the transmittance as
an exclusive cumprod, and the early stop as the prefix where the inclusive cumprod stays >= 1e-4
(the same pixels the sequential loop keeps).

usage: splat_bench.py DIR THREADS REPS   (reads DIR/{means,log_scales,quats,opacity_logits,sh,
       background,camera}.npy as written by rlx_bench_splat; prints one JSON line)
"""
import json
import math
import sys
import time

import numpy as np
import torch

C0, C1 = 0.28209479177387814, 0.4886025119029199
C2 = [1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396]
C3 = [-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154, -0.4570457994644658,
      1.445305721320277, -0.5900435899266435]


def sh_basis(d):
    x, y, z = d[:, 0], d[:, 1], d[:, 2]
    xx, yy, zz = x * x, y * y, z * z
    return torch.stack([torch.full_like(x, C0), -C1 * y, C1 * z, -C1 * x,
                        C2[0] * x * y, C2[1] * y * z, C2[2] * (2 * zz - xx - yy), C2[3] * x * z, C2[4] * (xx - yy),
                        C3[0] * y * (3 * xx - yy), C3[1] * x * y * z, C3[2] * y * (4 * zz - xx - yy),
                        C3[3] * z * (2 * zz - 3 * xx - 3 * yy), C3[4] * x * (4 * zz - xx - yy), C3[5] * z * (xx - yy),
                        C3[6] * x * (xx - 3 * yy)], dim=1)


def project(means, log_scales, quats, sh, cam):
    vm = cam[:16].reshape(4, 4)
    fx, fy, cx, cy, width, height, near = [float(v) for v in cam[16:23]]
    W, t = vm[:3, :3], vm[:3, 3]
    campos = -W.T @ t
    d = means - campos
    d = d / d.norm(dim=1, keepdim=True)
    k = sh.shape[1]
    color = torch.clamp((sh_basis(d)[:, :k, None] * sh).sum(1) + 0.5, min=0.0)
    v = means @ W.T + t
    z = v[:, 2]
    q = quats / quats.norm(dim=1, keepdim=True)
    w, x, y, zq = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    R = torch.stack([1 - 2 * (y * y + zq * zq), 2 * (x * y - w * zq), 2 * (x * zq + w * y),
                     2 * (x * y + w * zq), 1 - 2 * (x * x + zq * zq), 2 * (y * zq - w * x),
                     2 * (x * zq - w * y), 2 * (y * zq + w * x), 1 - 2 * (x * x + y * y)], dim=1).reshape(-1, 3, 3)
    B = W @ R * torch.exp(log_scales)[:, None, :]
    limx, limy = 1.3 * 0.5 * width / fx, 1.3 * 0.5 * height / fy
    tx = torch.clamp(v[:, 0] / z, -limx, limx)
    ty = torch.clamp(v[:, 1] / z, -limy, limy)
    zero = torch.zeros_like(z)
    J = torch.stack([fx / z, zero, -fx * tx / z, zero, fy / z, -fy * ty / z], dim=1).reshape(-1, 2, 3)
    JB = J @ B
    cov = JB @ JB.transpose(1, 2) + 0.3 * torch.eye(2, dtype=means.dtype)
    a, b, c = cov[:, 0, 0], cov[:, 0, 1], cov[:, 1, 1]
    det = a * c - b * b
    conic = torch.stack([c / det, -b / det, a / det], dim=1)
    with torch.no_grad():
        mid = 0.5 * (a + c)
        lam = mid + torch.sqrt(torch.clamp(mid * mid - det, min=0.1))
        radius = torch.ceil(3 * torch.sqrt(lam))
    xy = torch.stack([fx * v[:, 0] / z + cx, fy * v[:, 1] / z + cy], dim=1)
    with torch.no_grad():
        vis = (z >= near) & (det > 0) & (xy[:, 0] + radius > 0) & (xy[:, 0] - radius < width) & \
              (xy[:, 1] + radius > 0) & (xy[:, 1] - radius < height)
        radius = torch.where(vis, radius, torch.zeros_like(radius))
    return xy, conic, z, radius, color


def rasterize(xy, conic, color, opac, depth, radius, bg, width, height, tile=16):
    tiles_x, tiles_y = (width + tile - 1) // tile, (height + tile - 1) // tile
    with torch.no_grad():
        # tile ranges of every Gaussian, in depth order (one sort for all tiles: a stable sort
        # by depth, then a stable filter per tile, gives each tile's depth order, ties by index)
        order = torch.argsort(depth, stable=True)
        r = radius[order]
        gx, gy = xy[order, 0], xy[order, 1]
        x0 = torch.clamp(torch.floor((gx - r) / tile), min=0)
        x1 = torch.clamp(torch.floor((gx + r) / tile), max=tiles_x - 1)
        y0 = torch.clamp(torch.floor((gy - r) / tile), min=0)
        y1 = torch.clamp(torch.floor((gy + r) / tile), max=tiles_y - 1)
        live = torch.nonzero((r > 0) & (x0 <= x1) & (y0 <= y1)).flatten()
    rows = []
    for ty in range(tiles_y):
        row = []
        with torch.no_grad():
            in_row = live[(y0[live] <= ty) & (y1[live] >= ty)]
        for tx in range(tiles_x):
            with torch.no_grad():
                ids = order[in_row[(x0[in_row] <= tx) & (x1[in_row] >= tx)]]
            ys = torch.arange(ty * tile, min(height, (ty + 1) * tile), dtype=xy.dtype) + 0.5
            xs = torch.arange(tx * tile, min(width, (tx + 1) * tile), dtype=xy.dtype) + 0.5
            py, px = torch.meshgrid(ys, xs, indexing="ij")
            px, py = px.reshape(-1, 1), py.reshape(-1, 1)
            if ids.numel() == 0:
                row.append(bg.expand(len(ys), len(xs), 3))
                continue
            g = xy[ids]
            dx, dy = g[:, 0][None] - px, g[:, 1][None] - py
            cn = conic[ids]
            power = -0.5 * (cn[:, 0] * dx * dx + cn[:, 2] * dy * dy) - cn[:, 1] * dx * dy
            alpha = torch.clamp(opac[ids][None] * torch.exp(power), max=0.99)
            alpha = torch.where((power <= 0) & (alpha >= 1 / 255), alpha, torch.zeros_like(alpha))
            keep_t = torch.cumprod(1 - alpha, dim=1)
            with torch.no_grad():
                keep = keep_t >= 1e-4  # a prefix: the sequential loop's early stop
            alpha = alpha * keep
            T = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1 - alpha[:, :-1]], dim=1), dim=1)
            w = alpha * T
            out = w @ color[ids] + (T[:, -1:] * (1 - alpha[:, -1:])) * bg[None]
            row.append(out.reshape(len(ys), len(xs), 3))
        rows.append(torch.cat(row, dim=1))
    return torch.cat(rows, dim=0)


def main():
    d, threads, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    # far pixels give exp(power) below f32's normal range: flush denormals so that the peer's
    # arithmetic on them runs at full speed
    torch.set_flush_denormal(True)
    ld = lambda n: torch.from_numpy(np.load(f"{d}/{n}.npy").astype(np.float32))
    cam = np.load(f"{d}/camera.npy")
    width, height = int(cam[20]), int(cam[21])
    camt = torch.from_numpy(cam.astype(np.float32))
    params = [ld(n) for n in ("means", "log_scales", "quats", "opacity_logits", "sh")]
    bg = ld("background")
    weights = ld("weights")

    def render(p):
        xy, conic, z, radius, color = project(p[0], p[1], p[2], p[4], camt)
        return rasterize(xy, conic, color, torch.sigmoid(p[3]), z, radius, bg, width, height)

    def best(fn):
        fn()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return min(ts) * 1e3

    with torch.no_grad():
        img = render(params)
    fwd = best(lambda: render(params))

    def fwd_bwd():
        p = [x.clone().requires_grad_(True) for x in params]
        loss = (render(p) * weights).sum()
        loss.backward()
        return [x.grad for x in p]

    fb = best(fwd_bwd)
    np.save(f"{d}/torch_image.npy", img.numpy())
    print(json.dumps({"forward_ms": fwd, "forward_backward_ms": fb, "threads": torch.get_num_threads(),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
