/* Which squashfuse_ll squashd found: version and threading from its -h;
 * and the pooled squash-reader's command line the settings make. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mount/fuse_reader.h"
#include "mount/reader_args.h"
#include "unit.h"

/* The first lines and the FUSE options of squashfuse_ll -h as each
 * release prints them (abridged to what the parser reads). */
static const char debian_0_1_104[] =
	"squashfuse 0.1.104 (c) 2012 Dave Vasilevsky\n\n"
	"Usage: squashfuse_ll [options] ARCHIVE MOUNTPOINT\n"
	"    -f                     foreground operation\n"
	"    -s                     disable multi-threaded operation\n";
static const char upstream_0_6_2[] =
	"squashfuse 0.6.2 (c) 2012 Dave Vasilevsky\n\n"
	"Usage: /opt/squashfuse/bin/squashfuse_ll [options] ARCHIVE MOUNTPOINT\n\n"
	"FUSE options:\n"
	"    -f                     foreground operation\n"
	"    -s                     disable multi-threaded operation\n"
	"    -o max_threads         the maximum number of worker threads\n";
/* 0.2 and later built with --disable-multithreading: no -s. */
static const char upstream_single[] =
	"squashfuse 0.5.2 (c) 2012 Dave Vasilevsky\n\n"
	"Selection of FUSE options:\n"
	"    -f                     foreground operation\n";

static void test_parse(void)
{
	struct fuse_reader r;

	fuse_reader_parse(debian_0_1_104, &r);
	CHECK(r.version_known);
	CHECK_INT(r.minor, 1);
	CHECK_INT(r.patch, 104);
	CHECK(!r.multithreaded);
	CHECK_STR(r.description, "squashfuse_ll 0.1.104, single-threaded");

	fuse_reader_parse(upstream_0_6_2, &r);
	CHECK(r.multithreaded);
	CHECK_STR(r.description, "squashfuse_ll 0.6.2, multithreaded");

	/* The project's own reader: multithreaded, and it can resume. */
	fuse_reader_parse("squash-reader 0.1.0 (slurm-squash), multithreaded\nusage: ...\n", &r);
	CHECK(r.version_known);
	CHECK(r.multithreaded);
	CHECK(r.resumes);
	CHECK_STR(r.description, "squash-reader 0.1.0, multithreaded");
	/* One that predates --serve gets a process per mount, as before. */
	CHECK(!r.serves_many);
	fuse_reader_parse("squash-reader 0.2.0 (slurm-squash), multithreaded\n"
			  "  --serve /dev/fd/N  serve every mount squashd sends\n", &r);
	CHECK(r.resumes);
	CHECK(r.serves_many);
	CHECK(!r.unions);
	fuse_reader_parse("squash-reader 0.2.0 (slurm-squash), multithreaded\n"
			  "  --union            serve the images merged\n"
			  "  --serve /dev/fd/N  serve every mount squashd sends\n", &r);
	CHECK(r.serves_many);
	CHECK(r.unions);
	CHECK(!r.polls);
	fuse_reader_parse("squash-reader 0.3.0 (slurm-squash), multithreaded\n"
			  "  --serve /dev/fd/N  serve every mount squashd sends\n"
			  "  --poll-us N        with --serve: ...\n", &r);
	CHECK(r.polls);
	CHECK(!r.learns);
	fuse_reader_parse("squash-reader 0.3.0 (slurm-squash), multithreaded\n"
			  "  --serve /dev/fd/N  serve every mount squashd sends\n"
			  "  --profile-cache TEMPLATE  learn start profiles\n", &r);
	CHECK(r.learns);

	fuse_reader_parse(upstream_0_6_2, &r);
	CHECK(!r.resumes);
	CHECK(!r.serves_many);
	CHECK(!r.unions);

	fuse_reader_parse(upstream_single, &r);
	CHECK(r.version_known);
	CHECK(!r.multithreaded);
	CHECK_STR(r.description, "squashfuse_ll 0.5.2, single-threaded");

	/* Something else configured as squashfuse, or no answer at all. */
	fuse_reader_parse("usage: fusermount3 [options] mountpoint\n", &r);
	CHECK(!r.version_known);
	CHECK(!r.multithreaded);
	CHECK_STR(r.description, "squashfuse_ll (version unknown)");
	fuse_reader_parse("", &r);
	CHECK_STR(r.description, "squashfuse_ll (version unknown)");
	/* The name must start a line: not a path or a sentence. */
	fuse_reader_parse("see /usr/share/doc/squashfuse 1.2.3\n -s disable multi-threaded operation", &r);
	CHECK(!r.version_known);
	CHECK(!r.multithreaded);
}

/* The installed squashfuse_ll, as squashd will run it (as nobody, which
 * needs root to switch to; skipped otherwise). */
/* --poll-us and --profile-cache only when set; the template as it is
 * (the reader expands it as the user). */
static void test_reader_args(void)
{
	struct reader_args a;

	reader_args_set(-1, NULL);
	reader_args_fill(&a);
	CHECK_STR(a.argv[0], "squashfuse_ll");
	CHECK_STR(a.argv[1], "--serve");
	CHECK_STR(a.argv[2], "/dev/fd/3");
	CHECK(a.argv[3] == NULL);
	reader_args_set(200, "%h/.cache/slurm-squash/start-profiles");
	reader_args_fill(&a);
	CHECK_STR(a.argv[3], "--poll-us");
	CHECK_STR(a.argv[4], "200");
	CHECK_STR(a.argv[5], "--profile-cache");
	CHECK_STR(a.argv[6], "%h/.cache/slurm-squash/start-profiles");
	CHECK(a.argv[7] == NULL);
	reader_args_set(0, "");
	reader_args_fill(&a);
	CHECK_STR(a.argv[4], "0");
	CHECK(a.argv[5] == NULL);
}

static void test_probe_installed(void)
{
	struct fuse_reader r;

	if (geteuid() != 0 || access(SQUASHFUSE_LL_PATH, X_OK) != 0) {
		UNIT_SKIP("the probe of %s did not run (not root or not installed)", SQUASHFUSE_LL_PATH);
		return;
	}
	fuse_reader_probe(SQUASHFUSE_LL_PATH, &r);
	CHECK(r.version_known);
	printf("%s: %s\n", SQUASHFUSE_LL_PATH, r.description);
	/* A binary that prints nothing useful, or none at all. */
	fuse_reader_probe("/bin/true", &r);
	CHECK(!r.version_known);
	fuse_reader_probe("/nonexistent/squashfuse_ll", &r);
	CHECK(!r.version_known);
	CHECK(!r.multithreaded);
}

int main(void)
{
	test_parse();
	test_reader_args();
	test_probe_installed();
	return unit_exit_code();
}
