# Slurm integration tests (tests/slurm/README.md): a throw-away one-node Slurm cluster on loopback runs
# jobs/cpu.sbatch through completion and through preemption (signal -> checkpoint -> requeue -> resume).
# Needs root. Not part of `make test` (about 55 s); run `make test-slurm`.
SLURM_DEB_PACKAGES := slurmctld slurmd slurm-client munge
SLURM_STANDIN      := $(BUILD)/tests/slurm/fake_trainer

$(SLURM_STANDIN): tests/slurm/fake_trainer.c
	@mkdir -p $(@D)
	mpicc -O2 -Wall -Wextra $< -o $@

.PHONY: test-slurm
test-slurm:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(SLURM_DEB_PACKAGES)"
	@$(MAKE) --no-print-directory $(SLURM_STANDIN)
	BUILD=$(BUILD) bash tests/slurm/run_tests.sh
