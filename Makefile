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
        examples install uninstall clean
all: lib tool examples

lib: $(LIB_A) $(LIB_SO)

$(BUILD)/obj/%.o: src/%.c $(wildcard src/*.h) include/pagepipe.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -fPIC -fvisibility=hidden -c $< -o $@

$(LIB_A): $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

$(LIB_SO): $(LIB_OBJ)
	$(CC) $(CFLAGS_ALL) -shared -Wl,-soname,libpagepipe.so.$(SOVER) -o $@ $^ $(LDLIBS_ALL)
	ln -sf libpagepipe.so.$(VERSION) $(BUILD)/libpagepipe.so.$(SOVER)
	ln -sf libpagepipe.so.$(VERSION) $(BUILD)/libpagepipe.so

$(BUILD)/test/%: test/%.c $(wildcard test/*.h) $(wildcard test/fuzz/*.c) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIB_A) $(LDLIBS_ALL)

$(BUILD)/bench/%: bench/%.c $(wildcard bench/*.h) $(LIB_A)
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
# scripts (test/tool), then one line "N passed, N failed".
check: $(TESTS) $(TOOL)
	@sh test/run.sh $(BUILD)/test

check-asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer" \
	  SANFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all" check

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
# ---- end of benchmark helpers ---------------------------------------------

bench: $(BENCHES) $(BENCH_TOOLS) $(TOOL)
	@sh bench/run.sh $(BUILD)/bench

# The main job on built-in data: stream generated data through a pagepipe
# between threads, verify it, and compare with a kernel pipe.
demo: $(EXAMPLES)
	$(BUILD)/examples/stream_demo

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
