// cuDNN's DgradDreluBNBwdWeight fusion, which cudnn-frontend offers in C++ only (Graph::dbn_weight), as a torch
// extension for benchmarks/probes/fusion_probe_backward.py --dbn (issue 30). One graph, for the backward of
// [BN (training) -> ReLU -> conv] given dY at the conv's output, fp16, NHWC:
//   conv_dgrad(dY, W) -> relu_backward with the ReLU's input recomputed as X*scale+bias -> dZ (written, fp16)
//   -> dbn_weight(dZ, X, mean, inv_std, gamma): dgamma, dbeta and the three per-channel coefficients of the
//      BN's dx = eq_scale_dy * dZ + eq_scale_x * X + eq_bias (one pointwise pass after the graph).
// The BN's two per-channel sums over dZ are what dbn_weight folds into the dgrad graph.
#include <torch/extension.h>
#include <ATen/cudnn/Handle.h>
#include <cudnn_frontend.h>

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

#define FE_CHECK(call)                                                         \
    do {                                                                       \
        auto status_ = (call);                                                 \
        TORCH_CHECK(status_.is_good(), #call ": ", status_.get_message());     \
    } while (0)

namespace {

cudnnHandle_t handle_on_current_stream() {
    return at::native::getCudnnHandle();  // torch's own: this device's and thread's, on torch's current stream
}

void check_input(at::Tensor const& t, char const* name, at::ScalarType type, bool nhwc) {
    TORCH_CHECK(t.is_cuda() && t.scalar_type() == type, name, ": a CUDA tensor of ", type, " is needed, not ",
                t.device(), " ", t.scalar_type());
    TORCH_CHECK(nhwc ? t.is_contiguous(at::MemoryFormat::ChannelsLast) : t.is_contiguous(), name, " must be ",
                nhwc ? "channels_last" : "contiguous");
}

std::vector<int64_t> nhwc(std::vector<int64_t> const& d) {  // strides of an NCHW-indexed, NHWC-stored tensor
    return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]};
}

// The graph in one of four variants, which show what part of the pattern an engine takes (support() below):
// 0: the graph above; 1: the ReLU's input given as a tensor (RELU_IN) instead of recomputed; 2: dgrad ->
// dbn_weight, no ReLU; 3: dbn_weight alone, over a given dZ. Tensors a variant does not use stay null.
struct DbnGraph {
    fe::graph::Graph graph;
    TensorPtr dy, w, x, scale, bias, relu_in, mean, inv_std, gamma, dz, dgamma, dbeta, eq_dy, eq_x, eq_bias;

    DbnGraph(int64_t variant, int64_t n, int64_t c, int64_t h, int64_t w_, int64_t k, int64_t r, int64_t s, int64_t p,
             int64_t q, int64_t stride, int64_t pad) {
        auto const half = fe::DataType_t::HALF, fp32 = fe::DataType_t::FLOAT;
        graph.set_io_data_type(half).set_intermediate_data_type(fp32).set_compute_data_type(fp32);
        std::vector<int64_t> const xd{n, c, h, w_}, yd{n, k, p, q}, wd{k, c, r, s}, cd{1, c, 1, 1}, cs{c, 1, c, c};
        auto tensor = [&](char const* name, std::vector<int64_t> const& dim, std::vector<int64_t> const& st,
                          fe::DataType_t type) {
            return graph.tensor(fe::graph::Tensor_attributes().set_name(name).set_dim(dim).set_stride(st).set_data_type(type));
        };
        auto pw = [](fe::PointwiseMode_t mode) { return fe::graph::Pointwise_attributes().set_mode(mode); };
        x = tensor("X", xd, nhwc(xd), half);
        if (variant == 3) {
            dz = tensor("DZ", xd, nhwc(xd), half);
        } else {
            dy = tensor("DY", yd, nhwc(yd), half);
            w = tensor("W", wd, nhwc(wd), half);
            auto dgrad = graph.conv_dgrad(dy, w, fe::graph::Conv_dgrad_attributes().set_name("dgrad")
                                                     .set_padding({pad, pad}).set_stride({stride, stride})
                                                     .set_dilation({1, 1}));
            dgrad->set_dim(xd).set_stride(nhwc(xd));
            if (variant == 2) {
                dz = dgrad;
            } else {
                if (variant == 1) {
                    relu_in = tensor("RELU_IN", xd, nhwc(xd), half);
                } else {  // the forward BN as x*scale+bias, fp32 (B's Python graph: fp16)
                    scale = tensor("SCALE", cd, cs, fp32);
                    bias = tensor("BIAS", cd, cs, fp32);
                    relu_in = graph.pointwise(graph.pointwise(x, scale, pw(fe::PointwiseMode_t::MUL)), bias,
                                              pw(fe::PointwiseMode_t::ADD));
                }
                dz = graph.pointwise(dgrad, relu_in, pw(fe::PointwiseMode_t::RELU_BWD));  // IN_0: the loss, IN_1: the input
            }
            dz->set_output(true).set_data_type(half).set_dim(xd).set_stride(nhwc(xd));
        }
        mean = tensor("MEAN", cd, cs, fp32);
        inv_std = tensor("INV_STD", cd, cs, fp32);
        gamma = tensor("GAMMA", cd, cs, fp32);
        auto outs = graph.dbn_weight(dz, x, mean, inv_std, gamma, fe::graph::DBN_weight_attributes().set_name("dbn"));
        for (auto& t : outs) {
            t->set_output(true).set_data_type(fp32).set_dim(cd).set_stride(cs);
        }
        dgamma = outs[0], dbeta = outs[1], eq_dy = outs[2], eq_x = outs[3], eq_bias = outs[4];
    }

    // Validates the graph and builds its plans, in order (each step needs the one before): the first error, if any.
    fe::error_t plan(cudnnHandle_t handle, fe::BuildPlanPolicy_t policy) {
        std::vector<std::function<fe::error_t()>> steps{
            [&] { return graph.validate(); }, [&] { return graph.build_operation_graph(handle); },
            [&] { return graph.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::B, fe::HeurMode_t::FALLBACK}); },
            [&] { return graph.check_support(handle); }, [&] { return graph.build_plans(handle, policy); }};
        for (auto& step : steps) {
            auto status = step();
            if (status.is_bad()) return status;
        }
        return {};
    }
};

}  // namespace

class DgradDreluDbn {
   public:
    DgradDreluDbn(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s, int64_t p, int64_t q,
                  int64_t stride, int64_t pad, bool autotune)
        : g_(0, n, c, h, w, k, r, s, p, q, stride, pad), autotune_(autotune) {
        FE_CHECK(g_.plan(handle_on_current_stream(),
                         autotune ? fe::BuildPlanPolicy_t::ALL : fe::BuildPlanPolicy_t::HEURISTICS_CHOICE));
        plans_ = g_.graph.get_execution_plan_count();
    }

    // Runs the graph on torch's current stream; returns {dZ, dgamma, dbeta, eq_scale_dy, eq_scale_x, eq_bias}. The
    // first call with autotune picks the fastest plan that built (cudnn-frontend's Graph::autotune).
    std::vector<at::Tensor> run(at::Tensor dy, at::Tensor w, at::Tensor x, at::Tensor scale, at::Tensor bias,
                                at::Tensor mean, at::Tensor inv_std, at::Tensor gamma) {
        for (auto const& [t, name] : {std::pair{dy, "dy"}, {w, "w"}, {x, "x"}}) {
            check_input(t, name, at::kHalf, true);
        }
        for (auto const& [t, name] : {std::pair{scale, "scale"}, {bias, "bias"}, {mean, "mean"}, {inv_std, "inv_std"},
                                      {gamma, "gamma"}}) {
            check_input(t, name, at::kFloat, false);
        }
        auto dz = at::empty_like(x);
        auto per_channel = [&] { return at::empty({1, x.size(1), 1, 1}, x.options().dtype(at::kFloat)); };
        std::vector<at::Tensor> out{dz, per_channel(), per_channel(), per_channel(), per_channel(), per_channel()};
        std::unordered_map<TensorPtr, void*> pack{
            {g_.dy, dy.data_ptr()},        {g_.w, w.data_ptr()},         {g_.x, x.data_ptr()},
            {g_.scale, scale.data_ptr()},  {g_.bias, bias.data_ptr()},   {g_.mean, mean.data_ptr()},
            {g_.inv_std, inv_std.data_ptr()}, {g_.gamma, gamma.data_ptr()}, {g_.dz, dz.data_ptr()},
            {g_.dgamma, out[1].data_ptr()}, {g_.dbeta, out[2].data_ptr()}, {g_.eq_dy, out[3].data_ptr()},
            {g_.eq_x, out[4].data_ptr()},  {g_.eq_bias, out[5].data_ptr()}};
        auto handle = handle_on_current_stream();
        if (autotune_ && !tuned_) {
            auto ws = at::empty({std::max<int64_t>(g_.graph.get_autotune_workspace_size(), 1)}, x.options().dtype(at::kByte));
            FE_CHECK(g_.graph.autotune(handle, pack, ws.data_ptr()));
            tuned_ = true;
        }
        auto ws = at::empty({std::max<int64_t>(g_.graph.get_workspace_size(), 1)}, x.options().dtype(at::kByte));
        FE_CHECK(g_.graph.execute(handle, pack, ws.data_ptr()));
        return out;
    }

    int64_t plans() const { return plans_; }

   private:
    DbnGraph g_;
    bool autotune_, tuned_ = false;
    int64_t plans_ = 0;
};

// Whether an engine on this GPU builds the variant's graph (DbnGraph): "" where it does, else cuDNN's reason.
std::string support(int64_t variant, int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s,
                    int64_t p, int64_t q, int64_t stride, int64_t pad) {
    DbnGraph g(variant, n, c, h, w, k, r, s, p, q, stride, pad);
    auto status = g.plan(handle_on_current_stream(), fe::BuildPlanPolicy_t::ALL);
    return status.is_good() ? "" : status.get_message();
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("support", &support);
    pybind11::class_<DgradDreluDbn>(m, "DgradDreluDbn")
        .def(pybind11::init<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                            int64_t, bool>())
        .def("run", &DgradDreluDbn::run)
        .def("plans", &DgradDreluDbn::plans);
    m.def("cudnn_version", [] { return static_cast<int64_t>(cudnnGetVersion()); });
}
