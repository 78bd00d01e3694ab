/* Dilated convolutions as PyTorch exports them (scripts/atrous_reference.py: 3x3 at dilation 2 and 3 keeping the
 * plane, one of them grouped without a bias, a strided dilated 3x3, a dilated 2x2, a 1x3 and a dilated 3x1 with a
 * stride and padding per axis), exported by PyTorch at
 * 3x16x16 (the CTest fixture onnx_atrous_export writes $SNUG_ONNX_TORCH_DIR/atrous.onnx): each Conv becomes a
 * conv2d with the file's dilation, and one step from the same weights matches PyTorch's float64 reference on 4
 * images in one pass and as 2 micro-batches of 2, the loss and every gradient per tensor within 4 times PyTorch
 * float32's own deviation plus 1e-5 (onnx_torch_ref.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "graph/graph.h"
#include "onnx_torch_ref.h"
#include "ops/op.h"

/* The layers the loader names after the module's convolutions, with the kernel, stride and padding per axis,
 * dilation, groups and bias the module gives them (atrous_reference.py). */
static void test_dilations_mapped(void **state) {
    (void)state;
    static const struct {
        const char *name;
        size_t kernel, stride, padding, dilation, groups, params, kernel_w, stride_w, padding_w;
    } convs[] = {
        {"stem", 3, 2, 1, 1, 1, 2, 3, 2, 1},   {"atrous2", 3, 1, 2, 2, 1, 2, 3, 1, 2},
        {"atrous3", 3, 1, 3, 3, 2, 1, 3, 1, 3}, {"down", 3, 2, 2, 2, 1, 2, 3, 2, 2},
        {"wide", 2, 1, 1, 3, 1, 2, 2, 1, 1},   {"strip", 1, 1, 0, 1, 1, 2, 3, 2, 1},
        {"column", 3, 2, 1, 2, 1, 2, 1, 1, 0},
    };
    char path[1024];
    snug_graph *g = NULL;
    snug_error err = {0};
    if (snug_graph_from_onnx(torch_ref_path("atrous.onnx", path, sizeof path), &g, &err) != SNUG_OK)
        fail_msg("%s", err.message);
    for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++) {
        const int at = graph_find_node(g, convs[i].name);
        assert_true(at >= 0);
        const graph_node *n = &g->nodes[at];
        assert_ptr_equal(n->op, &op_conv2d);
        const conv2d_params *p = &n->p.conv2d;
        assert_int_equal(p->kernel, convs[i].kernel);
        assert_int_equal(p->kernel_w ? p->kernel_w : p->kernel, convs[i].kernel_w);
        assert_int_equal(p->kernel_w ? p->stride_w : p->stride, convs[i].stride_w);
        assert_int_equal(p->kernel_w ? p->padding_w : p->padding, convs[i].padding_w);
        assert_int_equal(n->p.conv2d.stride, convs[i].stride);
        assert_int_equal(n->p.conv2d.padding, convs[i].padding);
        assert_int_equal(n->p.conv2d.dilation, convs[i].dilation);
        assert_int_equal(n->p.conv2d.groups, convs[i].groups);
        assert_int_equal(n->n_params, convs[i].params);
    }
    snug_graph_free(g);
}

/* PyTorch's reference cases: one pass of 4 images, then micro-batches of 2. */
static void test_step_matches_pytorch(void **state) {
    (void)state;
    static const char *const cases[] = {"one_pass", "micro_batches"};
    for (size_t i = 0; i < 2; i++)
        torch_ref_check_image_case("atrous_ref", "atrous.onnx", 4, 3, 16, cases[i], "fc.bias");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dilations_mapped),
        cmocka_unit_test(test_step_matches_pytorch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
