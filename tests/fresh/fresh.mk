# `make test-fresh` (on demand, not part of `make test`; root; about 15-40 min): in a minimal Debian 12 root
# (debootstrap --variant=minbase, cached as $(BUILD)/fresh/debian12-minbase.tar.gz) install only make and git,
# clone the committed HEAD and run `make test` and `make run` there, as a new user would (tests/fresh/).
FRESH_DEB_PACKAGES := debootstrap

.PHONY: test-fresh
test-fresh:
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(FRESH_DEB_PACKAGES)"
	FRESH_DIR=$(BUILD)/fresh bash tests/fresh/test_fresh.sh
