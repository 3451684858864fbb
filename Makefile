# pagepipe build.  `make` builds the static and shared library; `make check`
# runs the tests; `make check-asan` / `make check-tsan` run them again under
# the sanitizers; `make bench` runs the benchmarks; `make install PREFIX=...`.
# Out-of-tree variants live in their own BUILD directory so they never mix.

CC      ?= cc
PREFIX  ?= /usr/local
BUILD   ?= build
OPT     ?= -O2 -g
SANFLAGS ?=
CFLAGS_ALL = -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -Iinclude -Isrc \
             $(OPT) $(SANFLAGS) $(CFLAGS)
LDLIBS_ALL = -pthread $(LDLIBS)

VERSION := $(shell sed -n 's/^\#define PAGEPIPE_VERSION "\(.*\)"/\1/p' include/pagepipe.h)
SOVER   := 0

LIB_SRC  := $(wildcard src/*.c)
LIB_OBJ  := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(LIB_SRC))
LIB_A    := $(BUILD)/libpagepipe.a
LIB_SO   := $(BUILD)/libpagepipe.so.$(VERSION)
TESTS    := $(patsubst test/%.c,$(BUILD)/test/%,$(wildcard test/*.c))
BENCHES  := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))
TOOL_SRC := $(wildcard tools/pagepipe/*.c)
TOOL     := $(BUILD)/pagepipe

.PHONY: all lib tool tests check check-asan check-tsan check-all bench demo \
        demo-capture examples install uninstall clean
all: lib tool examples

lib: $(LIB_A) $(LIB_SO)

$(BUILD)/obj/%.o: src/%.c $(wildcard src/*.h) include/pagepipe.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -fPIC -fvisibility=hidden -c $< -o $@

$(LIB_A): $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

# The exports and their versions: src/libpagepipe.map (test/abi_exports.c
# checks them against the header).
$(LIB_SO): $(LIB_OBJ) src/libpagepipe.map
	$(CC) $(CFLAGS_ALL) -shared -Wl,-soname,libpagepipe.so.$(SOVER) \
	  -Wl,--version-script=src/libpagepipe.map -o $@ $(LIB_OBJ) $(LDLIBS_ALL)
	ln -sf libpagepipe.so.$(VERSION) $(BUILD)/libpagepipe.so.$(SOVER)
	ln -sf libpagepipe.so.$(VERSION) $(BUILD)/libpagepipe.so

$(BUILD)/test/%: test/%.c $(wildcard test/*.h test/harness/*.h) $(wildcard test/fuzz/*.[ch]) \
                 $(wildcard tools/pagepipe/opts.*) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIB_A) $(LDLIBS_ALL)

# abi_exports reads the header and the shared library it checks.
$(BUILD)/test/abi_exports: test/abi_exports.c $(wildcard test/harness/*.h) include/pagepipe.h $(LIB_SO)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -DPP_HEADER='"$(abspath include/pagepipe.h)"' \
	  -DPP_SHARED_LIB='"$(abspath $(LIB_SO))"' -o $@ $< -ldl $(LDLIBS_ALL)

$(BUILD)/bench/%: bench/%.c $(wildcard bench/*.h test/harness/*.h) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIB_A) $(LDLIBS_ALL)

$(BUILD)/examples/%: examples/%.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIB_A) $(LDLIBS_ALL)

# The command (tools/pagepipe): front end, engine, options, endpoints.
$(TOOL): $(TOOL_SRC) $(wildcard tools/pagepipe/*.h) $(LIB_A)
	$(CC) $(CFLAGS_ALL) -o $@ $(TOOL_SRC) $(LIB_A) $(LDLIBS_ALL)

tool: $(TOOL)
tests: $(TESTS) $(TOOL)
examples: $(EXAMPLES)

# The test command: every test program and the command's end-to-end
# scripts (test/tool), then one line "N passed, N failed".  The example
# capture_procs is run by test/tool/example_capture_procs.sh.
check: $(TESTS) $(TOOL) $(BUILD)/examples/capture_procs
	@rm -f $(STALE_TESTS)
	@sh test/run.sh $(BUILD)/test

# run.sh runs every program in $(BUILD)/test: one whose source is gone
# (renamed or split) must not run on there.
STALE_TESTS = $(filter-out $(TESTS),$(wildcard $(BUILD)/test/*))

check-asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer" \
	  SANFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -DPP_CHECK_INVARIANTS" check

check-tsan:
	$(MAKE) BUILD=build-tsan OPT="-O1 -g" SANFLAGS="-fsanitize=thread" check

check-all: check check-asan check-tsan

# ---- benchmark helpers ----------------------------------------------------
# bench/gen.c is the data source and checking sink of bench/bench_tool.sh,
# not a benchmark: it is built outside $(BUILD)/bench, where bench/run.sh
# runs every program (run.sh then runs the bench/*.sh scripts).
BENCHES     := $(filter-out $(BUILD)/bench/gen,$(BENCHES))
BENCH_TOOLS := $(BUILD)/bench-tools/gen

$(BUILD)/bench-tools/%: bench/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $<

# bench_procs also times an iceoryx round trip where iceoryx's C binding is
# installed (Debian: libiceoryx-binding-c-dev, and iceoryx for iox-roudi);
# without it, it builds all the same and says it skipped that (iceoryx.h).
ICEORYX_H := $(firstword $(wildcard /usr/include/iceoryx/v*/iceoryx_binding_c/runtime.h))
ifneq ($(ICEORYX_H),)
$(BUILD)/bench/bench_procs: CFLAGS_ALL += -DPP_BENCH_ICEORYX \
  -isystem $(patsubst %/iceoryx_binding_c/runtime.h,%,$(ICEORYX_H))
$(BUILD)/bench/bench_procs: LDLIBS_ALL += -liceoryx_binding_c
endif
# ---- end of benchmark helpers ---------------------------------------------

bench: $(BENCHES) $(BENCH_TOOLS) $(TOOL)
	@sh bench/run.sh $(BUILD)/bench

# The main job on built-in data: stream generated data through a pagepipe
# between threads, verify it, and compare with a kernel pipe; then the
# capture -> encoder + display case (demo-capture).
demo: $(EXAMPLES)
	$(BUILD)/examples/stream_demo
	$(BUILD)/examples/capture_procs

# Issue 15's case: a capture process writes frames once into a shared pipe
# and fans them out by reference to an encoder and a display process, each
# reading at its own pace (examples/capture_procs.c; a few seconds).
demo-capture: $(BUILD)/examples/capture_procs
	$(BUILD)/examples/capture_procs

install: lib tool
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/share/man/man3 \
	  $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(TOOL) $(DESTDIR)$(PREFIX)/bin/
	for m in man/*.1; do if [ -f "$$m" ]; then install -m 644 $$m $(DESTDIR)$(PREFIX)/share/man/man1/; fi; done
	install -m 644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libpagepipe.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libpagepipe.so.$(SOVER)
	ln -sf libpagepipe.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libpagepipe.so
	install -m 644 include/pagepipe.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' pagepipe.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/pagepipe.pc
	for m in man/*.3; do install -m 644 $$m $(DESTDIR)$(PREFIX)/share/man/man3/; done

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/libpagepipe.* $(DESTDIR)$(PREFIX)/include/pagepipe.h \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig/pagepipe.pc
	for m in man/*.3; do rm -f $(DESTDIR)$(PREFIX)/share/man/man3/$$(basename $$m); done
	rm -f $(DESTDIR)$(PREFIX)/bin/pagepipe $(DESTDIR)$(PREFIX)/share/man/man1/pagepipe.1

clean:
	rm -rf build build-asan build-tsan build-clang build-clang-asan build-fuzz

# ---- valgrind: memcheck and helgrind -----------------------------------------
# `make check-valgrind`: every test program under memcheck; an error or a
# leak (definite or possible) fails the program.  `make check-helgrind`: the
# threaded tests under helgrind, built in build-helgrind with -DPP_HELGRIND
# (src/sanitize.h then tells helgrind about the futex lock and the atomics;
# the tests include sanitize.h first so their own atomics count too).
# test/valgrind.supp and test/helgrind.supp hold the known false alarms,
# each explained.  VG_ENV cuts the tests' work to fit valgrind's slowdown,
# HG_ENV by half again for helgrind, which is slower still on the stress
# tests' many small calls (measured in CI on 2 CPUs: memcheck about 5.5
# min; helgrind 7.3 min at VG_ENV's scale).
# Each program runs through a wrapper script in DIR/test, so test/run.sh
# counts and closes as for `make check`; the command's end-to-end scripts
# are left out (PP_NO_TOOL_SCRIPTS): they would only repeat `make check`.
VALGRIND ?= valgrind
VG_ENV = PP_VALGRIND=1 PP_TEST_SCALE=0.25 PP_CASE_TIMEOUT=300
HG_ENV = PP_VALGRIND=1 PP_TEST_SCALE=0.125 PP_CASE_TIMEOUT=300
# --soname-synonyms: fault.h's own malloc stays; only glibc's is replaced.
VG_MEMCHECK = --tool=memcheck --error-exitcode=99 --leak-check=full -q \
              --suppressions=$(CURDIR)/test/valgrind.supp \
              --soname-synonyms=somalloc=nouserintercepts
VG_HELGRIND = --tool=helgrind --error-exitcode=99 -q \
              --suppressions=$(CURDIR)/test/helgrind.supp
HG_BUILD = build-helgrind
# Every program with threads (the others cannot race): all but these.
HG_SINGLE = api_errors coalesce crash_all_die crash_lock crash_readers crash_writers \
            diff_kernel fault_core fault_zerocopy fuzz_replay huge_counts \
            pool_batch splice_file_pages splice_matches_model splice_matches_kernel \
            splice_shares_pages splice_isolation splice_errors splice_fd_file \
            splice_fd_devices splice_fd_errors vmsplice_matches_model \
            vmsplice_release_shared vmsplice_partial vmsplice_no_copy vmsplice_errors \
            shared_fork_eof shared_export_import shared_events_fd private_fork_ebadf \
            named_pipes \
            shared_stream shared_atomic_records shared_coalesce_packet shared_zero_copy \
            diff_kernel_procs shared_passing_matches_kernel crash_named \
            shared_dead_peer_at_once shared_fanout_by_reference \
            shared_by_reference_matches_private crash_fanout shared_parent_killed \
            signal_safe_calls
HG_TESTS = $(filter-out $(addprefix $(HG_BUILD)/test/,$(HG_SINGLE)), \
             $(patsubst $(BUILD)/test/%,$(HG_BUILD)/test/%,$(TESTS)))

# vg_wrap(DIR, VALGRIND-ARGS, PROGRAMS, COMMAND, ENV): DIR/test/NAME runs
# PROGRAM under valgrind with ENV, DIR/pagepipe is COMMAND.
define vg_wrap
	@mkdir -p $(1)/test && rm -f $(1)/test/*
	@for t in $(abspath $(3)); do \
	  printf '#!/bin/sh\nexec env $(5) $(VALGRIND) $(2) %s "$$@"\n' "$$t" \
	    > $(1)/test/$${t##*/} && chmod +x $(1)/test/$${t##*/} || exit 1; done
	@ln -sf $(abspath $(4)) $(1)/pagepipe
endef

.PHONY: check-valgrind check-helgrind clean-helgrind
check-valgrind: $(TESTS) $(TOOL)
	$(call vg_wrap,$(BUILD)/valgrind,$(VG_MEMCHECK),$(TESTS),$(TOOL),$(VG_ENV))
	@PP_NO_TOOL_SCRIPTS=1 sh test/run.sh $(BUILD)/valgrind/test

check-helgrind:
	$(MAKE) BUILD=$(HG_BUILD) OPT="-O1 -g" SANFLAGS="-DPP_HELGRIND -include sanitize.h" \
	  $(HG_TESTS) $(HG_BUILD)/pagepipe
	$(call vg_wrap,$(HG_BUILD)/valgrind,$(VG_HELGRIND),$(HG_TESTS),$(HG_BUILD)/pagepipe,$(HG_ENV))
	@PP_NO_TOOL_SCRIPTS=1 sh test/run.sh $(HG_BUILD)/valgrind/test

clean: clean-helgrind
clean-helgrind:
	rm -rf $(HG_BUILD)
# ---- end of valgrind ----------------------------------------------------------
