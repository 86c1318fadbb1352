#!/usr/bin/python3
"""Plain NumPy reference renderer for rlx's 3D Gaussian splatting (tests/sci/splat_test.cpp).

Written from the algorithm of the original 3DGS (Kerbl et al. 2023), independently of the C++
kernels: EWA projection with the 1.3 x half-FOV clamp of J and the 0.3 low-pass, SH colours up
to degree 3 (+0.5, clamped at 0), 3-sigma radii, 16x16 tile binning by the square of side 2r,
stable depth sort per tile, and front-to-back compositing with alpha = min(0.99, o G), skip
below 1/255, stop before T < 1e-4. Pixel (x, y) is sampled at (x + 0.5, y + 0.5).

usage: splat_reference.py DIR   (reads DIR/{means,log_scales,quats,opacities,sh,background,camera}.npy,
                                 writes DIR/image.npy)
"""
import math
import sys

import numpy as np

SH_C0 = 0.28209479177387814
SH_C1 = 0.4886025119029199
SH_C2 = [1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396]
SH_C3 = [-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154,
         -0.4570457994644658, 1.445305721320277, -0.5900435899266435]


def sh_color(sh, d):
    x, y, z = d
    k = sh.shape[0]
    c = SH_C0 * sh[0]
    if k > 1:
        c = c - SH_C1 * y * sh[1] + SH_C1 * z * sh[2] - SH_C1 * x * sh[3]
    if k > 4:
        xx, yy, zz = x * x, y * y, z * z
        c = (c + SH_C2[0] * x * y * sh[4] + SH_C2[1] * y * z * sh[5] + SH_C2[2] * (2 * zz - xx - yy) * sh[6]
             + SH_C2[3] * x * z * sh[7] + SH_C2[4] * (xx - yy) * sh[8])
    if k > 9:
        c = (c + SH_C3[0] * y * (3 * xx - yy) * sh[9] + SH_C3[1] * x * y * z * sh[10]
             + SH_C3[2] * y * (4 * zz - xx - yy) * sh[11] + SH_C3[3] * z * (2 * zz - 3 * xx - 3 * yy) * sh[12]
             + SH_C3[4] * x * (4 * zz - xx - yy) * sh[13] + SH_C3[5] * z * (xx - yy) * sh[14]
             + SH_C3[6] * x * (xx - 3 * yy) * sh[15])
    return np.maximum(c + 0.5, 0.0)


def quat_to_rot(q):
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def project(means, log_scales, quats, sh, cam):
    viewmat = cam[:16].reshape(4, 4)
    fx, fy, cx, cy, width, height, near = cam[16:23]
    W, t = viewmat[:3, :3], viewmat[:3, 3]
    campos = -W.T @ t
    n = means.shape[0]
    out = {"xy": np.zeros((n, 2)), "conic": np.zeros((n, 3)), "depth": np.zeros(n), "radius": np.zeros(n),
           "color": np.zeros((n, 3))}
    for i in range(n):
        d = means[i] - campos
        out["color"][i] = sh_color(sh[i], d / np.linalg.norm(d))
        v = W @ means[i] + t
        out["depth"][i] = v[2]
        if v[2] < near:
            continue
        R = quat_to_rot(quats[i])
        S = np.diag(np.exp(log_scales[i]))
        sigma = W @ R @ S @ S.T @ R.T @ W.T
        limx, limy = 1.3 * 0.5 * width / fx, 1.3 * 0.5 * height / fy
        tx = min(limx, max(-limx, v[0] / v[2]))
        ty = min(limy, max(-limy, v[1] / v[2]))
        J = np.array([[fx / v[2], 0, -fx * tx / v[2]], [0, fy / v[2], -fy * ty / v[2]]])
        cov = J @ sigma @ J.T + 0.3 * np.eye(2)
        det = cov[0, 0] * cov[1, 1] - cov[0, 1] ** 2
        if det <= 0:
            continue
        mid = 0.5 * (cov[0, 0] + cov[1, 1])
        lam = mid + math.sqrt(max(0.1, mid * mid - det))
        r = math.ceil(3 * math.sqrt(lam))
        mx, my = fx * v[0] / v[2] + cx, fy * v[1] / v[2] + cy
        if mx + r <= 0 or mx - r >= width or my + r <= 0 or my - r >= height:
            continue
        out["xy"][i] = (mx, my)
        out["conic"][i] = (cov[1, 1] / det, -cov[0, 1] / det, cov[0, 0] / det)
        out["radius"][i] = r
    return out


def rasterize(p, opacities, background, width, height, tile=16):
    tiles_x, tiles_y = (width + tile - 1) // tile, (height + tile - 1) // tile
    lists = [[] for _ in range(tiles_x * tiles_y)]
    for i in range(len(opacities)):
        r = p["radius"][i]
        if r <= 0:
            continue
        mx, my = p["xy"][i]
        x0, x1 = math.floor((mx - r) / tile), math.floor((mx + r) / tile)
        y0, y1 = math.floor((my - r) / tile), math.floor((my + r) / tile)
        for ty in range(max(y0, 0), min(y1, tiles_y - 1) + 1):
            for tx in range(max(x0, 0), min(x1, tiles_x - 1) + 1):
                lists[ty * tiles_x + tx].append(i)
    image = np.zeros((height, width, 3))
    for ty in range(tiles_y):
        for tx in range(tiles_x):
            ids = sorted(lists[ty * tiles_x + tx], key=lambda i: p["depth"][i])  # stable: ties by index
            for y in range(ty * tile, min(height, (ty + 1) * tile)):
                for x in range(tx * tile, min(width, (tx + 1) * tile)):
                    T, c = 1.0, np.zeros(3)
                    for i in ids:
                        dx, dy = p["xy"][i][0] - (x + 0.5), p["xy"][i][1] - (y + 0.5)
                        a, b, cc = p["conic"][i]
                        power = -0.5 * (a * dx * dx + cc * dy * dy) - b * dx * dy
                        if power > 0:
                            continue
                        alpha = min(0.99, opacities[i] * math.exp(power))
                        if alpha < 1.0 / 255.0:
                            continue
                        nt = T * (1 - alpha)
                        if nt < 1e-4:
                            break
                        c += p["color"][i] * alpha * T
                        T = nt
                    image[y, x] = c + T * background
    return image


def main():
    d = sys.argv[1]
    ld = lambda name: np.load(f"{d}/{name}.npy").astype(np.float64)
    cam = ld("camera")
    p = project(ld("means"), ld("log_scales"), ld("quats"), ld("sh"), cam)
    img = rasterize(p, ld("opacities"), ld("background"), int(cam[20]), int(cam[21]))
    np.save(f"{d}/image.npy", img)


if __name__ == "__main__":
    main()
