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

// --backend auto|cpu|cuda (which engine backend runs the model).
void add_backend_option(ArgParser& p);
BackendKind parse_backend_option(const ArgParser& p);
// --gpu-weights native|bf16 (declared by add_backend_option); native when absent.
GpuWeights parse_gpu_weights_option(const ArgParser& p);

// The --json outputs' "attention": settings and measured sparsity (prefill/decode totals,
// mean/min/max over (layer, head), dropped-mass bounds).
Json attention_json(const AttentionSettings& s, const AttentionProbes& probes);

}  // namespace sinkscope::cli
