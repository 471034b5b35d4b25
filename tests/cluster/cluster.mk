# Multi-node tests (docs/slurm.md "Several nodes"): a simulated 3-node cluster in network namespaces with one
# slurmd per node (tests/cluster/cluster.sh) runs jobs/multinode_ib.sbatch across nodes over TCP: topology,
# preemption and requeue, a cut link, a killed node, resharded resume, node-local staging. Needs root (network
# namespaces, mounts, the Slurm daemons); about 100 s. Part of `make test` (TEST_RUNS); alone:
# `make test-cluster`. Recursive (=): SLURM_DEB_PACKAGES comes from tests/slurm/slurm.mk, included later.
CLUSTER_DEB_PACKAGES = $(SLURM_DEB_PACKAGES) iproute2 util-linux mount

.PHONY: test-cluster
test-cluster:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(CLUSTER_DEB_PACKAGES)"
	@$(MAKE) --no-print-directory $(BINS) data
	BUILD=$(BUILD) bash tests/cluster/run_tests.sh

TEST_RUNS += test-cluster
