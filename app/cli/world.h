// SPDX-License-Identifier: Apache-2.0
// The processes of one sweep / validate run: MPI ranks when sinkscope-cli is built with MPI and
// started by mpirun / srun, else a world of one process (rank 0 of 1). Work is split by the
// callers (app/cli/cmd_validate.cpp); this holds only what they exchange: the resumed units
// (rank 0 -> all), the finished outcomes (all -> rank 0), and an abort that ends every rank.
#pragma once

#include <string>
#include <vector>

namespace sinkscope::cli {

struct World {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;  // among the ranks of this host
  std::string host;
  bool mpi = false;  // MPI was initialised
};

// Initialises MPI on first use when built with it (MPI_Init_thread, funneled). Throws
// std::runtime_error when an MPI launcher started several processes but this build has no MPI
// (each would run the whole job).
const World& world();
// MPI_Finalize when MPI was initialised (main() calls it once run_cli returns).
void world_finalize();

// " (rank R of N on HOST)" once a world of several processes has started; "" otherwise (error
// messages name the process that failed).
std::string world_label();

// Rank 0's text on every rank.
std::string world_broadcast(const std::string& text);
// Every rank's text, by rank, on rank 0 (empty on the others).
std::vector<std::string> world_gather(const std::string& text);
void world_barrier();
// Ends every rank now (MPI_Abort) with `code`; in a world of one, std::exit.
[[noreturn]] void world_abort(int code);

}  // namespace sinkscope::cli
