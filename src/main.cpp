// cnntrain: data-parallel CNN training (see README.md).
#include <cstdio>
#include <exception>
#include <new>

#include "src/comm/comm.h"
#include "src/train/config.h"
#include "src/train/gpu_info.h"
#include "src/base/error.h"
#include "src/train/signals.h"
#include "src/train/trainer.h"

int main(int argc, char** argv) {
  using namespace cnn;
  // Before MPI_Init: a scheduler's signal may arrive during start-up, and SIGUSR1's default action kills.
  install_stop_handlers();
  comm_init(&argc, &argv);
  Config cfg;
  ParseResult pr;
  int code = 0;
  std::string msg;
  try {
    pr = parse_config(argc, argv, cfg);
  } catch (const Error& e) {
    code = e.code();
    msg = e.what();
  }
  agree_or_exit(code, msg);
  if (pr.action == ParseAction::kGpuInfo) {
    const int rc = print_gpu_info(stdout);
    comm_finalize();
    return rc;
  }
  if (pr.action != ParseAction::kRun) {
    if (world_rank() == 0) std::fputs(pr.text.c_str(), stdout);
    comm_finalize();
    return 0;
  }
  int rc = kExitFailure;
  try {
    rc = run_training(cfg);
  } catch (const CollectiveError& e) {
    // Every rank is here with the same message: one report, and a clean exit instead of a job abort.
    if (world_rank() == 0) report_error(e.what(), false);
    comm_finalize();
    return e.code();
  } catch (const Error& e) {
    fatal(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    fatal(kExitFailure, "out of memory; use a smaller --train.batch or --eval.batch, or fewer ranks per node");
  } catch (const std::exception& e) {
    fatal(kExitFailure, e.what());
  }
  comm_finalize();
  return rc;
}
