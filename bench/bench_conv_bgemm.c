/* The convolutions of the cnn, resnet20 and unet workloads, one sample on one thread, through the float32 kernels
 * a bf16 plan takes where conv3x3_bf16 does not pay (the direct kernels, Winograd, the lowering through
 * gemm_direct) and through the lowering whose products are bgemm's (im2col, then Y = W cols, cols' = W^T dY and
 * col2im, dW += dY cols^T): microseconds per sample of each direction, the best of `repeats` timed rounds of about
 * 0.1 s of the thread's CPU time each (so that other work on the cores does not count). A column a layer cannot
 * take is '-'. Read it against bench_fma_peak's lines and the CPU's bgemm kernel (bgemm.h): the per-shape choice
 * of conv2d.c's conv_bgemm_pays comes from these columns.
 *
 * usage: bench_conv_bgemm [repeats] */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/bf16.h"
#include "kernels/bgemm.h"
#include "kernels/conv3x3_direct.h"
#include "kernels/conv3x3_winograd.h"
#include "kernels/gemm_direct.h"
#include "kernels/im2col.h"
#include "kernels/isa.h"

typedef struct layer_row {
    const char *name;
    size_t c, co, h, k, stride, pad;
} layer_row;

static const layer_row rows[] = {
    {"cnn conv1", 1, 32, 28, 3, 1, 1},          {"cnn conv2", 32, 64, 14, 3, 1, 1},
    {"resnet20 conv1", 3, 16, 32, 3, 1, 1},     {"resnet20 s1", 16, 16, 32, 3, 1, 1},
    {"resnet20 s2", 32, 32, 16, 3, 1, 1},       {"resnet20 s3", 64, 64, 8, 3, 1, 1},
    {"resnet20 down2", 16, 32, 32, 3, 2, 1},    {"resnet20 down3", 32, 64, 16, 3, 2, 1},
    {"resnet20 short2", 16, 32, 32, 1, 2, 0},   {"resnet20 short3", 32, 64, 16, 1, 2, 0},
    {"unet enc1.conv1", 1, 16, 256, 3, 1, 1},   {"unet level 1", 16, 16, 256, 3, 1, 1},
    {"unet enc2.conv1", 16, 32, 128, 3, 1, 1},  {"unet level 2", 32, 32, 128, 3, 1, 1},
    {"unet enc3.conv1", 32, 64, 64, 3, 1, 1},   {"unet level 3", 64, 64, 64, 3, 1, 1},
    {"unet enc4.conv1", 64, 128, 32, 3, 1, 1},  {"unet level 4", 128, 128, 32, 3, 1, 1},
    {"unet mid.conv1", 128, 256, 16, 3, 1, 1},  {"unet mid.conv2", 256, 256, 16, 3, 1, 1},
    {"unet dec4.conv1", 256, 128, 32, 3, 1, 1}, {"unet dec3.conv1", 128, 64, 64, 3, 1, 1},
    {"unet dec2.conv1", 64, 32, 128, 3, 1, 1},  {"unet dec1.conv1", 32, 16, 256, 3, 1, 1},
    {"unet head 1x1", 16, 2, 256, 1, 1, 0},
};

/* The paths: the float32 ones a layer may take today, and the lowering through bgemm. */
enum { P_DIRECT, P_WINO, P_GEMM, P_BGEMM, N_PATHS };
enum { D_FWD, D_DX, D_DW, N_DIRS };
static const char *path_names[N_PATHS] = {"direct", "wino", "gemm", "bgemm"};

typedef struct bufs {
    im2col_geom g;
    conv3x3_shape s;
    size_t kdim, npix;
    float *x, *y, *w, *b, *dx, *dy, *dw, *col, *scratch, *u, *du, *bwork;
} bufs;

static float *filled(size_t n, unsigned seed) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "bench_conv_bgemm: out of memory for %zu floats\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = bf16_round((float)((i * 2654435761u + seed) % 2001) / 1000.0f - 1.0f);
    return p;
}

static size_t most(size_t a, size_t b) { return a > b ? a : b; }

static bool is3x3(const layer_row *r) { return r->k == 3 && r->pad == 1 && (r->stride == 1 || r->stride == 2); }

static bufs bufs_of(const layer_row *r) {
    bufs b = {.g = {.c = r->c, .h = r->h, .w = r->h, .k = r->k, .stride = r->stride, .pad = r->pad, .kw = r->k,
                    .sw = r->stride, .pw = r->pad, .dilation = 1},
              .s = {.c = r->c, .co = r->co, .h = r->h, .w = r->h}};
    size_t padded, span, nd = 0, u1 = 0, u2 = 0, s1 = 0, s2 = 0, du = 0, wdw = 0;
    im2col_axis(r->h, r->k, r->stride, r->pad, 1, &padded, &span, &b.g.ho);
    b.g.wo = b.g.ho;
    b.kdim = r->c * r->k * r->k;
    b.npix = b.g.ho * b.g.wo;
    if (is3x3(r) && r->stride == 1) {
        conv3x3_scratch_floats(&b.s, &nd);
        conv3x3_winograd_weights_floats(&b.s, false, &u1);
        conv3x3_winograd_weights_floats(&b.s, true, &u2);
        conv3x3_winograd_scratch_floats(&b.s, false, 1, &s1);
        conv3x3_winograd_scratch_floats(&b.s, true, 1, &s2);
        conv3x3_winograd_dw_floats(&b.s, &du);
        conv3x3_winograd_dw_scratch_floats(&b.s, &wdw);
    } else if (is3x3(r)) {
        conv3x3_s2_scratch_floats(&b.s, &nd);
    }
    const size_t xn = r->c * r->h * r->h, yn = r->co * b.npix, wn = r->co * b.kdim;
    const size_t bw = most(bgemm_workspace_floats(r->co, b.npix, b.kdim, 1),
                           most(bgemm_workspace_floats(b.kdim, b.npix, r->co, 1),
                                bgemm_workspace_floats(r->co, b.kdim, b.npix, 1)));
    b.x = filled(xn, 1), b.y = filled(yn, 2), b.w = filled(wn, 3), b.b = filled(r->co, 4), b.dx = filled(xn, 5);
    b.dy = filled(yn, 6), b.dw = filled(wn, 7), b.col = filled(b.kdim * b.npix, 8);
    b.scratch = filled(most(nd, most(most(s1, s2), wdw)), 9), b.u = filled(most(u1, u2), 10), b.du = filled(du, 11);
    b.bwork = filled(bw, 12);
    return b;
}

static void bufs_free(bufs *b) {
    float *all[] = {b->x, b->y, b->w, b->b, b->dx, b->dy, b->dw, b->col, b->scratch, b->u, b->du, b->bwork};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

static bool available(const layer_row *r, int p, int d) {
    if (p == P_DIRECT) return is3x3(r) && conv3x3_direct_available();
    if (p == P_WINO) return is3x3(r) && r->stride == 1 && conv3x3_winograd_available() && r->c >= 16 &&
                            r->co >= 16 && r->h >= 8 && (d != D_DW || conv3x3_winograd_dw_pays(&(conv3x3_shape){
                                                                          r->c, r->co, r->h, r->h}));
    return true;
}

static const float *cols_of(const layer_row *r, bufs *b) {
    if (r->k == 1 && r->stride == 1 && r->pad == 0) return b->x;
    im2col(b->col, b->x, &b->g);
    return b->col;
}

static void run_lowered(const layer_row *r, bufs *b, int p, int d) {
    const size_t co = r->co, kdim = b->kdim, npix = b->npix;
    const bool pw = r->k == 1 && r->stride == 1 && r->pad == 0;
    if (d == D_FWD) {
        const float *cols = cols_of(r, b);
        if (p == P_GEMM) gemm_direct(co, npix, kdim, b->w, kdim, 1, cols, npix, b->y, npix, b->b, false);
        else {
            for (size_t o = 0; o < co; o++)
                for (size_t j = 0; j < npix; j++) b->y[o * npix + j] = b->b[o];
            bgemm(co, npix, kdim, (sgemm_mat){b->w, kdim, 1}, (sgemm_mat){cols, npix, 1}, b->y, npix, NULL, true,
                  b->bwork, 1);
        }
    } else if (d == D_DX) {
        float *dcols = pw ? b->dx : b->col;
        if (p == P_GEMM) gemm_direct(kdim, npix, co, b->w, 1, kdim, b->dy, npix, dcols, npix, NULL, pw);
        else bgemm(kdim, npix, co, (sgemm_mat){b->w, 1, kdim}, (sgemm_mat){b->dy, npix, 1}, dcols, npix, NULL, pw,
                   b->bwork, 1);
        if (!pw) col2im_add(b->dx, b->col, &b->g);
    } else {
        const float *cols = cols_of(r, b);
        if (p == P_GEMM) gemm_direct_nt(co, kdim, npix, b->dy, npix, cols, npix, b->dw, kdim);
        else bgemm(co, kdim, npix, (sgemm_mat){b->dy, npix, 1}, (sgemm_mat){cols, 1, npix}, b->dw, kdim, NULL, true,
                   b->bwork, 1);
    }
}

/* One call of path p in direction d (Winograd's weights derived beforehand: once per call of the op). */
static void run(const layer_row *r, bufs *b, int p, int d) {
    const conv3x3_shape *s = &b->s;
    const bool s2 = r->stride == 2;
    if (p == P_DIRECT && d == D_FWD) {
        if (s2) conv3x3_s2_forward(s, b->y, b->x, b->w, b->b, b->scratch, 0, 1);
        else conv3x3_forward(s, b->y, b->x, b->w, b->b, b->scratch, 0, 1);
    } else if (p == P_DIRECT) {
        float *dx = d == D_DX ? b->dx : NULL, *dw = d == D_DW ? b->dw : NULL;
        if (s2) conv3x3_s2_backward(s, dx, dw, NULL, b->dy, b->x, b->w, b->scratch, 0, 1);
        else conv3x3_backward(s, dx, dw, NULL, b->dy, b->x, b->w, b->scratch, 0, 1);
    } else if (p == P_WINO && d == D_FWD) {
        conv3x3_winograd_forward(s, b->y, b->x, b->u, b->b, b->scratch, 0, 1);
    } else if (p == P_WINO && d == D_DX) {
        conv3x3_winograd_backward_dx(s, b->dx, b->dy, b->u, b->scratch, true, 0, 1);
    } else if (p == P_WINO) {
        conv3x3_winograd_dw_accumulate(s, b->du, b->dy, b->x, b->scratch);
    } else {
        run_lowered(r, b, p, d);
    }
}

static double thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Microseconds per call of path p in direction d: the best of `repeats` rounds of calls that take about 0.1 s. */
static double micros(const layer_row *r, bufs *b, int p, int d, int repeats) {
    if (p == P_WINO && d != D_DW) conv3x3_winograd_weights(&b->s, b->u, b->w, d == D_DX, 0, 1);
    run(r, b, p, d);
    double t0 = thread_seconds();
    run(r, b, p, d);
    const double once = thread_seconds() - t0;
    const long calls = once > 0.1 ? 1 : (long)(0.1 / (once > 1e-7 ? once : 1e-7)) + 1;
    double best = 1e30;
    for (int k = 0; k < repeats; k++) {
        t0 = thread_seconds();
        for (long i = 0; i < calls; i++) run(r, b, p, d);
        const double us = (thread_seconds() - t0) / (double)calls * 1e6;
        if (us < best) best = us;
    }
    return best;
}

int main(int argc, char **argv) {
    const int repeats = argc > 1 ? atoi(argv[1]) : 3;
    if (repeats < 1 || argc > 2) {
        fprintf(stderr, "usage: bench_conv_bgemm [repeats >= 1]\n");
        return 2;
    }
    omp_set_num_threads(1);
    printf("one sample, one thread, microseconds (best of %d); ISA %s\n", repeats, kernel_isa_name(kernel_isa_now()));
    printf("%-17s %4s %4s %4s %2s |", "layer", "c", "co", "h", "s");
    const char *dirs[N_DIRS] = {"forward", "input grad", "weight grad"};
    for (int d = 0; d < N_DIRS; d++) printf(" %-32s |", dirs[d]);
    printf("\n%-33s |", "");
    for (int d = 0; d < N_DIRS; d++) {
        for (int p = 0; p < N_PATHS; p++) printf(" %7s", path_names[p]);
        printf(" |");
    }
    printf("\n");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const layer_row *r = &rows[i];
        bufs b = bufs_of(r);
        printf("%-17s %4zu %4zu %4zu %2zu |", r->name, r->c, r->co, r->h, r->stride);
        for (int d = 0; d < N_DIRS; d++) {
            for (int p = 0; p < N_PATHS; p++) {
                if (available(r, p, d)) printf(" %7.0f", micros(r, &b, p, d, repeats));
                else printf(" %7s", "-");
            }
            printf(" |");
        }
        printf("\n");
        fflush(stdout);
        bufs_free(&b);
    }
    return 0;
}
