// zerorun's flags of the process, given to the run and to bench alike: which backend carries the
// collectives and whether freed host memory goes back to the kernel; and the backend's start.
#include <iostream>

#include "backends/nccl_backend.hpp"
#include "flags.hpp"

namespace zerorun {

void add_process_flags(CLI::App& app, ProcessArgs& pa) {
    app.add_option("--backend", pa.backend, "nccl or mpi (default: nccl when a CUDA device is visible, else mpi)")
        ->check(CLI::IsMember({"nccl", "mpi"}));
    app.add_flag("--return-freed-memory", pa.return_freed,
                 "Let the C library return freed host memory to the kernel (its default); without it zerorun keeps it, so no "
                 "collective times page faults on its scratch (docs/runtime.md)");
}

Backend* start_backend(Backend& mpi, ProcessArgs& pa, double timeout_s, std::unique_ptr<Backend>& nccl, int& exit_code) {
    std::string why_default;
    if (pa.backend.empty()) {
        std::string no_gpu = gpu_unavailable_reason();
        pa.backend = no_gpu.empty() ? "nccl" : "mpi";
        why_default = no_gpu.empty() ? "default: a CUDA device is visible" : "default: " + no_gpu;
    }
    if (mpi.rank() == 0)
        std::cerr << "# zerorun: backend " << pa.backend << " (" << (why_default.empty() ? "--backend" : why_default) << ")\n";
    if (pa.backend != "nccl") return &mpi;
    try {
        nccl = make_nccl_backend(mpi, timeout_s);
        return nccl.get();
    } catch (const NcclInitError& e) {
        if (*e.what()) std::cerr << "zerorun: error: --backend nccl: " << e.what() << '\n';
        std::cerr.flush();
        exit_code = 2;
        return nullptr;
    } catch (const std::exception& e) {
        std::cerr << "zerorun: error: rank " << mpi.rank() << ": --backend nccl: " << e.what() << '\n';
        mpi.abort(2);
    }
    return nullptr;
}

}  // namespace zerorun
