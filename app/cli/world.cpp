// SPDX-License-Identifier: Apache-2.0
#include "app/cli/world.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#ifdef SINKSCOPE_HAVE_MPI
#include <mpi.h>
#endif

namespace sinkscope::cli {

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

// Processes an MPI launcher says it started (Open MPI, MPICH / Hydra, Slurm).
int launcher_size() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return 1;
}

World make_world() {
  World w;
  w.host = host_name();
#ifdef SINKSCOPE_HAVE_MPI
  if (launcher_size() > 1) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w.size);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &w.local_rank);
    MPI_Comm_size(local, &w.local_size);
    MPI_Comm_free(&local);
    w.mpi = true;
  }
#else
  if (launcher_size() > 1)
    throw std::runtime_error(
        "started by an MPI launcher with " + std::to_string(launcher_size()) +
        " processes, but this sinkscope-cli was built without MPI (configure with "
        "-DSINKSCOPE_MPI=ON and Open MPI installed); each process would run the whole job");
#endif
  return w;
}

World* g_world = nullptr;

}  // namespace

const World& world() {
  if (!g_world) g_world = new World(make_world());
  return *g_world;
}

std::string world_label() {
  if (!g_world || g_world->size < 2) return "";
  return " (rank " + std::to_string(g_world->rank) + " of " + std::to_string(g_world->size) +
         " on " + g_world->host + ")";
}

void world_finalize() {
#ifdef SINKSCOPE_HAVE_MPI
  if (g_world && g_world->mpi) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
#endif
}

std::string world_broadcast(const std::string& text) {
#ifdef SINKSCOPE_HAVE_MPI
  const World& w = world();
  if (w.mpi && w.size > 1) {
    long long n = static_cast<long long>(text.size());
    MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    std::string out = w.rank == 0 ? text : std::string(size_t(n), '\0');
    // In pieces below 2^31 bytes (MPI counts are int).
    for (long long off = 0; off < n; off += (1LL << 30)) {
      const int len = int(std::min<long long>(n - off, 1LL << 30));
      MPI_Bcast(out.data() + off, len, MPI_CHAR, 0, MPI_COMM_WORLD);
    }
    return out;
  }
#endif
  return text;
}

std::vector<std::string> world_gather(const std::string& text) {
#ifdef SINKSCOPE_HAVE_MPI
  const World& w = world();
  if (w.mpi && w.size > 1) {
    // Point to point from each rank to rank 0, in pieces below 2^31 bytes.
    std::vector<std::string> all;
    if (w.rank == 0) {
      all.resize(size_t(w.size));
      all[0] = text;
      for (int r = 1; r < w.size; ++r) {
        long long n = 0;
        MPI_Recv(&n, 1, MPI_LONG_LONG, r, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        all[size_t(r)].resize(size_t(n));
        for (long long off = 0; off < n; off += (1LL << 30)) {
          const int len = int(std::min<long long>(n - off, 1LL << 30));
          MPI_Recv(all[size_t(r)].data() + off, len, MPI_CHAR, r, 2, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
        }
      }
    } else {
      long long n = static_cast<long long>(text.size());
      MPI_Send(&n, 1, MPI_LONG_LONG, 0, 1, MPI_COMM_WORLD);
      for (long long off = 0; off < n; off += (1LL << 30)) {
        const int len = int(std::min<long long>(n - off, 1LL << 30));
        MPI_Send(text.data() + off, len, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
      }
    }
    return all;
  }
#endif
  return {text};
}

void world_barrier() {
#ifdef SINKSCOPE_HAVE_MPI
  const World& w = world();
  if (w.mpi && w.size > 1) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

void world_abort(int code) {
#ifdef SINKSCOPE_HAVE_MPI
  const World& w = world();
  if (w.mpi && w.size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

}  // namespace sinkscope::cli
