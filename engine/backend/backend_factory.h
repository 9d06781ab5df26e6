// SPDX-License-Identifier: Apache-2.0
// Picks the backend at run time (docs/architecture.md, design principle 5): CUDA when the build has
// it and a device is present, the CPU reference otherwise. Works the same in builds without CUDA.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "engine/backend/backend.h"

namespace sinkscope {

enum class BackendKind { kAuto, kCpu, kCuda };

const char* backend_kind_name(BackendKind k);                          // "auto" | "cpu" | "cuda"
std::optional<BackendKind> parse_backend_kind(std::string_view text);  // the same names

// True when this build has the CUDA backend and a CUDA device is usable. Otherwise false, with
// the reason in *why ("built without CUDA", "no CUDA device found", the runtime's error, ...).
bool cuda_available(std::string* why = nullptr);
// Name of the current CUDA device; "" without CUDA or without a device.
std::string cuda_device_name();
// Makes CUDA device (ordinal modulo the device count) current for this thread (a process per
// device under MPI: its local rank). Returns the ordinal used, or -1 with *why without CUDA or a
// device.
int select_cuda_device(int ordinal, std::string* why = nullptr);
// Free and total memory of the current CUDA device (device-wide); false, with why, without CUDA
// or without a device.
bool cuda_memory_info(uint64_t* free_bytes, uint64_t* total_bytes, std::string* why = nullptr);

// kCpu: the CPU backend. kCuda: the CUDA backend or a BackendError saying why not (e.g. "CUDA
// backend requested but this build has no CUDA (built without CUDA)"). kAuto: CUDA when
// available and it constructs, else the CPU backend; *note (optional) then says which was
// chosen and why CUDA was not.
// What a model needs that the CUDA backend does not implement yet and would otherwise ignore
// silently ("" when nothing; today nothing: own windows and LongRoPE run on the device, and
// what make_cuda_backend cannot run it refuses by name itself). make_backend refuses CUDA for
// such a model (--backend cuda) or falls back to the CPU (auto), naming it.
std::string cuda_unsupported_reason(const ModelConfig& config);

std::unique_ptr<Backend> make_backend(std::shared_ptr<const Model> model,
                                      const BackendOptions& options,
                                      BackendKind kind = BackendKind::kAuto,
                                      std::string* note = nullptr);

}  // namespace sinkscope
