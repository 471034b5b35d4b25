# The NCCL code path under the emulator, beyond test-mpi's np 2 and 4 runs of the whole suite: the emulated
# NCCL's collectives at np 3 (that suite runs each case with immediate and deferred streams itself), and the
# emu data-parallel, synchronised batch-norm, 16-bit gradient-wire and the trainer's sums (RankSums, e.g.
# average_buffers' scale after its NCCL sum) suites with deferred emulator streams (queued device work run at
# synchronisation points in seeded orders), at np 2 and 4; the strict-mode suites (test_nccl_emu_strict.cpp:
# planted NCCL and device-selection misuses caught, NcclCollectives clean) and RankSums in all three runs.
MPI_DEFERRED_SUITES = 'EmuDataParallel.*:SyncBatchNorm.Emu*:*GradWire16*NcclEmu*:*Strict*:*RankSums*'

.PHONY: test-mpi-nccl
test-mpi-nccl: $(MPI_TEST)
	$(MPIRUN) -np 3 $(MPI_TEST) --gtest_brief=1 --gtest_filter='*NcclEmu*:*Strict*:EmuDataParallel.*:SyncBatchNorm.*:*RankSums*'
	CNNTRAIN_SIMT_DEFER=7 $(MPIRUN) -x CNNTRAIN_SIMT_DEFER -np 2 $(MPI_TEST) --gtest_brief=1 --gtest_filter=$(MPI_DEFERRED_SUITES)
	CNNTRAIN_SIMT_DEFER=19 $(MPIRUN) -x CNNTRAIN_SIMT_DEFER -np 4 $(MPI_TEST) --gtest_brief=1 --gtest_filter=$(MPI_DEFERRED_SUITES)

TEST_RUNS += test-mpi-nccl

# The harness prints failures from every rank: a planted failure on rank 1 alone fails the job and its message
# and test name reach the output tagged with the rank.
.PHONY: test-mpi-harness
test-mpi-harness: $(MPI_TEST)
	@out=$$($(MPIRUN) -np 2 $(MPI_TEST) --gtest_also_run_disabled_tests \
	  --gtest_filter='MpiHarness.DISABLED_PlantedFailureOnRankOne' 2>&1); rc=$$?; \
	if [ $$rc = 0 ]; then echo "$$out"; echo "test-mpi-harness: a failure on rank 1 did not fail the job" >&2; exit 1; fi; \
	for want in '[rank 1] tests/mpi/test_harness.cpp' 'planted failure on rank 1 only' \
	    '[rank 1] FAILED MpiHarness.DISABLED_PlantedFailureOnRankOne'; do \
	  grep -qF -- "$$want" <<<"$$out" || { echo "$$out"; echo "test-mpi-harness: missing '$$want'" >&2; exit 1; }; \
	done; echo "test-mpi-harness: rank 1's planted failure failed the job (exit $$rc) and was printed with its rank"

TEST_RUNS += test-mpi-harness
