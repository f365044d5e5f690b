// cuDNN's DgradDreluBNBwdWeight fusion, which cudnn-frontend offers in C++ only (Graph::dbn_weight), as a torch
// extension for benchmarks/fusion_probe_backward.py --dbn (issue 30). One graph, for the backward of
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

// Heuristic modes for the plans, the same where a graph is only asked whether it builds (support) and where it runs.
std::vector<fe::HeurMode_t> const MODES{fe::HeurMode_t::A, fe::HeurMode_t::B, fe::HeurMode_t::FALLBACK};

void check_input(at::Tensor const& t, char const* name, at::ScalarType type, bool nhwc) {
    TORCH_CHECK(t.is_cuda() && t.scalar_type() == type, name, ": a CUDA tensor of ", type, " is needed, not ",
                t.device(), " ", t.scalar_type());
    TORCH_CHECK(nhwc ? t.is_contiguous(at::MemoryFormat::ChannelsLast) : t.is_contiguous(), name, " must be ",
                nhwc ? "channels_last" : "contiguous");
}

std::vector<int64_t> nhwc(std::vector<int64_t> const& d) {  // strides of an NCHW-indexed, NHWC-stored tensor
    return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]};
}

}  // namespace

class DgradDreluDbn {
   public:
    DgradDreluDbn(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s, int64_t p, int64_t q,
                  int64_t stride, int64_t pad, bool autotune)
        : autotune_(autotune) {
        auto const half = fe::DataType_t::HALF, fp32 = fe::DataType_t::FLOAT;
        graph_.set_io_data_type(half).set_intermediate_data_type(fp32).set_compute_data_type(fp32);
        std::vector<int64_t> const xd{n, c, h, w}, yd{n, k, p, q}, wd{k, c, r, s}, cd{1, c, 1, 1}, cs{c, 1, c, c};
        auto tensor = [&](char const* name, std::vector<int64_t> const& dim, std::vector<int64_t> const& st,
                          fe::DataType_t type) {
            return graph_.tensor(fe::graph::Tensor_attributes().set_name(name).set_dim(dim).set_stride(st).set_data_type(type));
        };
        dy_ = tensor("DY", yd, nhwc(yd), half);
        w_ = tensor("W", wd, nhwc(wd), half);
        x_ = tensor("X", xd, nhwc(xd), half);
        scale_ = tensor("SCALE", cd, cs, fp32);  // the forward BN as x*scale+bias, fp32 (B's Python graph: fp16)
        bias_ = tensor("BIAS", cd, cs, fp32);
        mean_ = tensor("MEAN", cd, cs, fp32);
        inv_std_ = tensor("INV_STD", cd, cs, fp32);
        gamma_ = tensor("GAMMA", cd, cs, fp32);

        auto dgrad = graph_.conv_dgrad(dy_, w_, fe::graph::Conv_dgrad_attributes().set_name("dgrad")
                                                    .set_padding({pad, pad}).set_stride({stride, stride}).set_dilation({1, 1}));
        dgrad->set_dim(xd).set_stride(nhwc(xd));
        auto pw = [](fe::PointwiseMode_t mode) { return fe::graph::Pointwise_attributes().set_mode(mode); };
        auto relu_in = graph_.pointwise(graph_.pointwise(x_, scale_, pw(fe::PointwiseMode_t::MUL)), bias_,
                                        pw(fe::PointwiseMode_t::ADD));
        dz_ = graph_.pointwise(dgrad, relu_in, pw(fe::PointwiseMode_t::RELU_BWD));  // IN_0: the loss, IN_1: the input
        dz_->set_output(true).set_data_type(half).set_dim(xd).set_stride(nhwc(xd));
        auto outs = graph_.dbn_weight(dz_, x_, mean_, inv_std_, gamma_, fe::graph::DBN_weight_attributes().set_name("dbn"));
        for (auto& t : outs) {
            t->set_output(true).set_data_type(fp32).set_dim(cd).set_stride(cs);
        }
        dgamma_ = outs[0], dbeta_ = outs[1], eq_dy_ = outs[2], eq_x_ = outs[3], eq_bias_ = outs[4];

        auto handle = handle_on_current_stream();
        FE_CHECK(graph_.validate());
        FE_CHECK(graph_.build_operation_graph(handle));
        FE_CHECK(graph_.create_execution_plans(MODES));
        FE_CHECK(graph_.check_support(handle));
        FE_CHECK(graph_.build_plans(handle, autotune ? fe::BuildPlanPolicy_t::ALL : fe::BuildPlanPolicy_t::HEURISTICS_CHOICE));
        plans_ = graph_.get_execution_plan_count();
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
            {dy_, dy.data_ptr()},        {w_, w.data_ptr()},         {x_, x.data_ptr()},
            {scale_, scale.data_ptr()},  {bias_, bias.data_ptr()},   {mean_, mean.data_ptr()},
            {inv_std_, inv_std.data_ptr()}, {gamma_, gamma.data_ptr()}, {dz_, dz.data_ptr()},
            {dgamma_, out[1].data_ptr()}, {dbeta_, out[2].data_ptr()}, {eq_dy_, out[3].data_ptr()},
            {eq_x_, out[4].data_ptr()},  {eq_bias_, out[5].data_ptr()}};
        auto handle = handle_on_current_stream();
        if (autotune_ && !tuned_) {
            auto ws = at::empty({std::max<int64_t>(graph_.get_autotune_workspace_size(), 1)}, x.options().dtype(at::kByte));
            FE_CHECK(graph_.autotune(handle, pack, ws.data_ptr()));
            tuned_ = true;
        }
        auto ws = at::empty({std::max<int64_t>(graph_.get_workspace_size(), 1)}, x.options().dtype(at::kByte));
        FE_CHECK(graph_.execute(handle, pack, ws.data_ptr()));
        return out;
    }

    int64_t plans() const { return plans_; }

   private:
    fe::graph::Graph graph_;
    TensorPtr dy_, w_, x_, scale_, bias_, mean_, inv_std_, gamma_, dz_, dgamma_, dbeta_, eq_dy_, eq_x_, eq_bias_;
    bool autotune_, tuned_ = false;
    int64_t plans_ = 0;
};

// Which parts of the pattern an engine on this GPU takes: each variant's graph is built and its plans made, and
// the error (empty where it builds) is returned. 0: the graph above; 1: the ReLU's input given as a tensor instead
// of recomputed; 2: dgrad -> dbn_weight, no ReLU; 3: dbn_weight alone, over a given dZ.
std::string support(int64_t variant, int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s,
                    int64_t p, int64_t q, int64_t stride, int64_t pad) {
    auto const half = fe::DataType_t::HALF, fp32 = fe::DataType_t::FLOAT;
    fe::graph::Graph g;
    g.set_io_data_type(half).set_intermediate_data_type(fp32).set_compute_data_type(fp32);
    std::vector<int64_t> const xd{n, c, h, w}, yd{n, k, p, q}, wd{k, c, r, s}, cd{1, c, 1, 1}, cs{c, 1, c, c};
    auto tensor = [&](char const* name, std::vector<int64_t> const& dim, std::vector<int64_t> const& st,
                      fe::DataType_t type) {
        return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_dim(dim).set_stride(st).set_data_type(type));
    };
    auto pw = [](fe::PointwiseMode_t mode) { return fe::graph::Pointwise_attributes().set_mode(mode); };
    auto x = tensor("X", xd, nhwc(xd), half);
    TensorPtr dz;
    if (variant == 3) {
        dz = tensor("DZ", xd, nhwc(xd), half);
    } else {
        auto dgrad = g.conv_dgrad(tensor("DY", yd, nhwc(yd), half), tensor("W", wd, nhwc(wd), half),
                                  fe::graph::Conv_dgrad_attributes().set_padding({pad, pad}).set_stride({stride, stride})
                                      .set_dilation({1, 1}));
        dgrad->set_dim(xd).set_stride(nhwc(xd));
        if (variant == 2) {
            dz = dgrad;
        } else {
            auto relu_in = variant == 1 ? tensor("RELU_IN", xd, nhwc(xd), half)
                                        : g.pointwise(g.pointwise(x, tensor("SCALE", cd, cs, fp32), pw(fe::PointwiseMode_t::MUL)),
                                                      tensor("BIAS", cd, cs, fp32), pw(fe::PointwiseMode_t::ADD));
            dz = g.pointwise(dgrad, relu_in, pw(fe::PointwiseMode_t::RELU_BWD));
        }
        dz->set_output(true).set_data_type(half).set_dim(xd).set_stride(nhwc(xd));
    }
    auto outs = g.dbn_weight(dz, x, tensor("MEAN", cd, cs, fp32), tensor("INV_STD", cd, cs, fp32),
                             tensor("GAMMA", cd, cs, fp32), fe::graph::DBN_weight_attributes());
    for (auto& t : outs) {
        t->set_output(true).set_data_type(fp32).set_dim(cd).set_stride(cs);
    }
    auto handle = handle_on_current_stream();
    std::vector<std::function<fe::error_t()>> steps{
        [&] { return g.validate(); }, [&] { return g.build_operation_graph(handle); },
        [&] { return g.create_execution_plans(MODES); },
        [&] { return g.check_support(handle); }, [&] { return g.build_plans(handle, fe::BuildPlanPolicy_t::ALL); }};
    for (auto& step : steps) {  // in order: each needs the one before
        auto status = step();
        if (status.is_bad()) return status.get_message();
    }
    return "";
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
