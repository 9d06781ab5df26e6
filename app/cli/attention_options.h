// SPDX-License-Identifier: Apache-2.0
// The dynamic-sparse attention settings as command-line options, shared by the commands that
// run the model, and their figures in --json output.
#pragma once

#include "app/cli/args.h"
#include "engine/backend/attention.h"
#include "engine/backend/backend_factory.h"
#include "engine/util/json_io.h"

namespace sinkscope::cli {

// Adds --attention, --lambda-prefill, --lambda-decode, --threshold-mode, --min-seq-len,
// --block-size, --keep-exp (the config schema's attention block as flags).
void add_attention_options(ArgParser& p);
// Reads them (after parse()); throws UsageError naming the option and the allowed range.
AttentionSettings parse_attention_options(const ArgParser& p);

// Which backend runs the model and how: --backend auto|cpu|cuda, --gpu-weights native|bf16,
// --sparse-decode auto|always (the last two matter on the CUDA backend only).
struct BackendChoice {
  BackendKind kind = BackendKind::kAuto;
  GpuWeights gpu_weights = GpuWeights::kAuto;
  GpuActivations gpu_activations = kDefaultGpuActivations;
  SparseDecodeKernels sparse_decode = SparseDecodeKernels::kAuto;
};
void add_backend_option(ArgParser& p);
// Reads the three options (after parse()); throws UsageError naming a bad value.
BackendChoice parse_backend_choice(const ArgParser& p);
// make_backend() with the choice's fields set in `opt`; *note as make_backend's.
std::unique_ptr<Backend> open_backend(std::shared_ptr<const Model> model, BackendOptions opt,
                                      const BackendChoice& choice, std::string* note);

// The --json outputs' "attention": settings and measured sparsity (prefill/decode totals,
// mean/min/max over (layer, head), dropped-mass bounds).
Json attention_json(const AttentionSettings& s, const AttentionProbes& probes);
// The --json outputs' "decode_path": what the CUDA backend ran for the sparse-asked decode
// steps (DecodePathStats); null when the backend makes no choice.
Json decode_path_json(const DecodePathStats& d);
// One line for the text outputs, or "" when there is nothing to say.
std::string decode_path_line(const DecodePathStats& d);

}  // namespace sinkscope::cli
