# Slurm integration tests (docs/slurm.md): a throw-away one-node Slurm cluster on loopback runs
# jobs/cpu.sbatch through completion and through preemption (signal -> checkpoint -> requeue -> resume).
# Needs root (it starts munged, slurmctld and slurmd). Part of `make test` (TEST_RUNS); alone: `make test-slurm`.
SLURM_DEB_PACKAGES := slurmctld slurmd slurm-client munge
SLURM_STANDIN      := $(BUILD)/tests/slurm/fake_trainer

$(SLURM_STANDIN): tests/slurm/fake_trainer.c
	@mkdir -p $(@D)
	mpicc -O2 -Wall -Wextra $< -o $@

.PHONY: test-slurm
test-slurm:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(SLURM_DEB_PACKAGES)"
	@$(MAKE) --no-print-directory $(SLURM_STANDIN) $(BINS) data
	BUILD=$(BUILD) bash tests/slurm/run_tests.sh

TEST_RUNS += test-slurm
