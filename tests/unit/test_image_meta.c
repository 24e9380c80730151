/* An image's /.squash/meta: the file squash-pack writes parses; malformed
 * and hostile ones (long lines, NULs, huge files, '..', bad names, unknown
 * keys) are refused naming the line; environments become the operations
 * tasks apply, and what an image may not set is refused. */
#include "config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image_meta.h"
#include "unit.h"

static const char good[] =
	"# written by squash-pack\n"
	"format 1\n"
	"\n"
	"name prgenv-gnu\n"
	"version 24.11+v1\n"
	"description GNU programming environment\twith tabs  and  spaces\n"
	"created 2026-11-29T10:00:00Z\n"
	"created-by alice\n"
	"source /home/alice/my env\n"
	"packer squash-pack 0.2.0\n"
	"target /squash/prgenv-gnu\n"
	"default-env default\n"
	"env default prepend-path PATH bin\n"
	"env default prepend-path PATH ./sbin/\n"
	"env default set-path APP_HOME .\n"
	"env default set GREETING hello  world \n"
	"env default append-path MANPATH share//man\n"
	"env dev set LD_LIBRARY_PATH /x\n"
	"env dev set EMPTY\n";

static void test_good(void)
{
	struct squash_image_meta m;
	char err[512] = "";

	CHECK_INT(squash_image_meta_parse(good, sizeof good - 1, &m, err, sizeof err), 0);
	CHECK_STR(err, "");
	CHECK_STR(m.name, "prgenv-gnu");
	CHECK_STR(m.version, "24.11+v1");
	CHECK_STR(m.description, "GNU programming environment\twith tabs  and  spaces");
	CHECK_STR(m.created, "2026-11-29T10:00:00Z");
	CHECK_STR(m.created_by, "alice");
	CHECK_STR(m.source, "/home/alice/my env");
	CHECK_STR(m.packer, "squash-pack 0.2.0");
	CHECK_STR(m.target, "/squash/prgenv-gnu");
	CHECK_STR(m.default_env, "default");
	CHECK_INT(m.n_env, 7);
	CHECK_STR(m.env[1].value, "sbin");
	CHECK_STR(m.env[2].value, "");
	CHECK_STR(m.env[3].value, "hello  world "); /* the rest of the line, as written */
	CHECK_STR(m.env[4].value, "share/man");
	CHECK_STR(m.env[6].value, "");
	CHECK_INT(m.env[4].line, 17);
	CHECK(squash_image_meta_has_env(&m, "dev"));
	CHECK(!squash_image_meta_has_env(&m, "prod"));
	squash_image_meta_free(&m);

	/* Only the format line is required; no final newline is fine. */
	CHECK_INT(squash_image_meta_parse("format 1", 8, &m, err, sizeof err), 0);
	CHECK(m.name == NULL && m.n_env == 0);
	squash_image_meta_free(&m);
}

/* text must be refused with a message holding want. */
static void refused(const char *text, size_t len, const char *want)
{
	struct squash_image_meta m;
	char err[512] = "";

	CHECK_INT(squash_image_meta_parse(text, len, &m, err, sizeof err), -1);
	CHECK_CONTAINS(err, want);
	CHECK(m.name == NULL && m.n_env == 0);
}

#define REFUSED(text, want) refused(text, sizeof(text) - 1, want)

static void test_malformed(void)
{
	REFUSED("", "empty: no 'format 1' line");
	REFUSED("# only a comment\n\n", "empty");
	REFUSED("name x\nformat 1\n", "line 1: the file must start with 'format 1'");
	REFUSED("format 2\n", "line 1: format '2' is not one this slurm-squash reads (1)");
	REFUSED("format 1 extra\n", "line 1: format takes one value");
	REFUSED("format 1\nnmae x\n", "line 2: unknown key 'nmae'");
	REFUSED("format 1\nname a\nname b\n", "line 3: name is given twice");
	REFUSED("format 1\nname a b\n", "line 2: name takes one value; 'b' is one too many");
	REFUSED("format 1\nname\n", "line 2: name: expected [A-Za-z0-9._+-]");
	REFUSED("format 1\nname a/b\n", "line 2: name: expected");
	REFUSED("format 1\nversion 1:2\n", "line 2: version: expected");
	REFUSED("format 1\ncreated 2026-11-29 10:00\n", "line 2: created: expected a UTC time");
	REFUSED("format 1\ntarget squash/x\n", "line 2: target: expected an absolute path");
	REFUSED("format 1\ntarget /squash/../etc\n", "line 2: target");
	REFUSED("format 1\ndescription\n", "line 2: description: expected a value");
	REFUSED("format 1\ndefault-env x\n", "default-env x: no env x line defines it");
	REFUSED("format 1\ndefault-env none\nenv none set A b\n", "line 2: default-env");
	REFUSED("format 1\nenv none set A b\n", "line 2: 'none' cannot name an environment");
	REFUSED("format 1\nenv e set\n", "line 2: expected 'env ENVNAME");
	REFUSED("format 1\nenv e unset A\n", "line 2: unknown operation 'unset'");
	REFUSED("format 1\nenv 1e set A b\n", "line 2: '1e' is not an environment name");
	REFUSED("format 1\nenv e-x set A b\n", "is not an environment name");
	REFUSED("format 1\nenv e set A=B c\n", "line 2: 'A=B' is not a variable name");
	REFUSED("format 1\nenv e prepend-path PATH\n", "line 2: a path is missing");
	REFUSED("format 1\nenv e prepend-path PATH /bin\n", "must be relative");
	REFUSED("format 1\nenv e prepend-path PATH bin extra\n", "prepend-path takes one value");
	REFUSED("format 1\nenv e set-path X a:b\n", "may not contain ':'");
}

static void test_hostile(void)
{
	char *big;
	size_t n;

	REFUSED("format 1\nenv e prepend-path PATH ../../etc\n", "line 2: the path may not have a '..'");
	REFUSED("format 1\nenv e prepend-path PATH bin/../../x\n", "'..'");
	REFUSED("format 1\nenv e prepend-path PATH bin/..\n", "'..'");
	REFUSED("format 1\nname a\0b\n", "line 2: contains a NUL byte");
	REFUSED("format 1\ndescription \x1b[31mred\n", "line 2: contains a control character (\\x1b)");
	REFUSED("format 1\r\n", "line 1: contains a control character (\\x0d)");
	REFUSED("format 1\ndescription \xc2\x9b" "31m\n", "line 2: is not UTF-8 text"); /* C1 CSI */
	REFUSED("format 1\ndescription \xff\n", "line 2: is not UTF-8 text (byte \\xff)");
	REFUSED("format 1\ndescription \xc0\xaf\n", "is not UTF-8"); /* overlong '/' */
	/* Printable UTF-8 is text. */
	struct squash_image_meta m;
	char err[512];
	static const char utf8[] = "format 1\ndescription Zürich ✓\n";
	CHECK_INT(squash_image_meta_parse(utf8, strlen(utf8), &m, err, sizeof err), 0);
	squash_image_meta_free(&m);

	/* A line one byte too long, and one exactly at the limit. */
	big = malloc(SQUASH_META_MAX_BYTES + 2);
	n = (size_t)sprintf(big, "format 1\ndescription ");
	memset(big + n, 'x', SQUASH_META_MAX_LINE - 12 + 1);
	n += SQUASH_META_MAX_LINE - 12 + 1;
	refused(big, n, "line 2: longer than 4096 bytes");
	CHECK_INT(squash_image_meta_parse(big, n - 1, &m, err, sizeof err), 0);
	squash_image_meta_free(&m);

	/* Over 64 KiB of comments: refused by size, before any line. */
	memset(big, '#', SQUASH_META_MAX_BYTES + 1);
	for (size_t i = 100; i < SQUASH_META_MAX_BYTES; i += 100)
		big[i] = '\n';
	refused(big, SQUASH_META_MAX_BYTES + 1, "more than the 65536 a metadata file may have");

	/* 65 env lines. */
	n = (size_t)sprintf(big, "format 1\n");
	for (int i = 0; i <= SQUASH_META_MAX_ENV_LINES; i++)
		n += (size_t)sprintf(big + n, "env e set V%d x\n", i);
	refused(big, n, "line 66: more than 64 env lines");

	/* Names longer than 64. */
	n = (size_t)sprintf(big, "format 1\nenv e set ");
	memset(big + n, 'V', 65);
	n += 65;
	refused(big, n, "is not a variable name");
	free(big);
}

static void test_env_ops(void)
{
	struct squash_image_meta m;
	struct squash_env_ops ops;
	char err[512] = "", *v, *w;

	CHECK_INT(squash_image_meta_parse(good, sizeof good - 1, &m, err, sizeof err), 0);
	CHECK_INT(squash_image_env_ops(&m, "default", "/squash/p", false, &ops, err, sizeof err), 0);
	CHECK_INT(ops.count, 5);
	CHECK_STR(ops.op[0].var, "PATH");
	CHECK_INT(ops.op[0].kind, SQUASH_ENV_PREPEND_PATH);
	CHECK_STR(ops.op[0].value, "/squash/p/bin");
	CHECK_INT(ops.op[2].kind, SQUASH_ENV_SET); /* set-path */
	CHECK_STR(ops.op[2].value, "/squash/p");
	CHECK_STR(ops.op[3].value, "hello  world ");

	/* Applied in order: the later prepend comes first. */
	v = squash_env_op_result(&ops.op[0], "/usr/bin:/bin");
	CHECK_STR(v, "/squash/p/bin:/usr/bin:/bin");
	w = squash_env_op_result(&ops.op[1], v);
	CHECK_STR(w, "/squash/p/sbin:/squash/p/bin:/usr/bin:/bin");
	free(v);
	free(w);
	v = squash_env_op_result(&ops.op[0], NULL);
	CHECK_STR(v, "/squash/p/bin"); /* unset: no stray ':' */
	free(v);
	v = squash_env_op_result(&ops.op[0], "");
	CHECK_STR(v, "/squash/p/bin");
	free(v);
	/* MANPATH unset: its empty element keeps the system's manuals. */
	v = squash_env_op_result(&ops.op[4], NULL);
	CHECK_STR(v, ":/squash/p/share/man");
	free(v);
	v = squash_env_op_result(&ops.op[4], "");
	CHECK_STR(v, ":/squash/p/share/man");
	free(v);
	{
		char man[] = "/squash/p/share/man";
		struct squash_env_op pre = { SQUASH_ENV_PREPEND_PATH, "MANPATH", man };

		v = squash_env_op_result(&pre, NULL);
		CHECK_STR(v, "/squash/p/share/man:");
		/* Applied again: the same, its empty element kept. */
		w = squash_env_op_result(&pre, v);
		CHECK_STR(w, "/squash/p/share/man:");
		free(v);
		free(w);
		v = squash_env_op_result(&pre, "/opt/man");
		CHECK_STR(v, "/squash/p/share/man:/opt/man"); /* set by the user: theirs */
		free(v);
		pre.var = "INFOPATH";
		v = squash_env_op_result(&pre, NULL);
		CHECK_STR(v, "/squash/p/share/man:");
		free(v);
	}
	v = squash_env_op_result(&ops.op[4], "/usr/share/man");
	CHECK_STR(v, "/usr/share/man:/squash/p/share/man");
	free(v);
	/* Applied again (a step inherits its batch script's environment):
	 * moved to its place, never repeated. */
	v = squash_env_op_result(&ops.op[0], "/squash/p/bin:/usr/bin:/bin");
	CHECK_STR(v, "/squash/p/bin:/usr/bin:/bin");
	free(v);
	v = squash_env_op_result(&ops.op[0], "/usr/bin:/squash/p/bin:/bin:/squash/p/bin");
	CHECK_STR(v, "/squash/p/bin:/usr/bin:/bin");
	free(v);
	v = squash_env_op_result(&ops.op[4], "/squash/p/share/man:/usr/share/man");
	CHECK_STR(v, "/usr/share/man:/squash/p/share/man");
	free(v);
	v = squash_env_op_result(&ops.op[0], "/squash/p/bin");
	CHECK_STR(v, "/squash/p/bin");
	free(v);
	v = squash_env_op_result(&ops.op[3], "old");
	CHECK_STR(v, "hello  world ");
	free(v);
	squash_env_ops_free(&ops);

	/* Loader variables: only when the user named the environment. */
	CHECK_INT(squash_image_env_ops(&m, "dev", "/squash/p", false, &ops, err, sizeof err), -1);
	CHECK_CONTAINS(err, "line 18: environment dev sets LD_LIBRARY_PATH: loader variables (LD_*) are applied only from an environment you name (--squash-env; squash-shell --env)");
	CHECK_INT(squash_image_env_ops(&m, "dev", "/squash/p", true, &ops, err, sizeof err), 0);
	CHECK_INT(ops.count, 2);
	squash_env_ops_free(&ops);

	CHECK_INT(squash_image_env_ops(&m, "prod", "/squash/p", true, &ops, err, sizeof err), -1);
	CHECK_STR(err, "no environment prod");
	squash_image_meta_free(&m);

	/* Slurm's and the plugin's variables: never, named or not. */
	static const char slurm[] = "format 1\nenv e set SLURM_JOB_ID 1\nenv f set SQUASH_MOUNT /x\n"
				    "env g set SPANK_X 1\nenv h set LD_PRELOAD /x.so\n";
	CHECK_INT(squash_image_meta_parse(slurm, sizeof slurm - 1, &m, err, sizeof err), 0);
	CHECK_INT(squash_image_env_ops(&m, "e", "/m", true, &ops, err, sizeof err), -1);
	CHECK_CONTAINS(err, "line 2: environment e sets SLURM_JOB_ID: Slurm's variables");
	CHECK_INT(squash_image_env_ops(&m, "f", "/m", true, &ops, err, sizeof err), -1);
	CHECK_CONTAINS(err, "SQUASH_MOUNT: slurm-squash's variables");
	CHECK_INT(squash_image_env_ops(&m, "g", "/m", true, &ops, err, sizeof err), -1);
	CHECK_INT(squash_image_env_ops(&m, "h", "/m", false, &ops, err, sizeof err), -1);
	CHECK_CONTAINS(err, "LD_PRELOAD: loader variables");
	CHECK(squash_env_var_refusal("LD_AUDIT", false) != NULL);
	CHECK(squash_env_var_refusal("LD_AUDIT", true) == NULL);
	CHECK(squash_env_var_refusal("PATH", false) == NULL);
	CHECK(squash_env_var_refusal("slurm_job_id", false) == NULL); /* another variable */
	squash_image_meta_free(&m);

	CHECK(squash_env_name_valid("_a1"));
	CHECK(!squash_env_name_valid(""));
	CHECK(!squash_env_name_valid("a.b"));
}

/* The file as tasks read it: never through a symbolic link, never from a
 * FIFO (which would hang), not past 64 KiB. */
static void test_load(void)
{
	char dir[] = "/tmp/test_image_meta.XXXXXX", path[256], err[512] = "";
	struct squash_image_meta m;
	int fd;

	if (!mkdtemp(dir)) {
		UNIT_SKIP("no temporary directory");
		return;
	}
	CHECK_INT(squash_image_meta_load(dir, &m, err, sizeof err), 0); /* no .squash: no metadata */
	snprintf(path, sizeof path, "%s/.squash", dir);
	CHECK_INT(symlink("/etc", path), 0);
	CHECK_INT(squash_image_meta_load(dir, &m, err, sizeof err), -1);
	CHECK_CONTAINS(err, ".squash: not a directory (a symbolic link is not followed)");
	unlink(path);
	CHECK_INT(mkdir(path, 0755), 0);
	CHECK_INT(squash_image_meta_load(dir, &m, err, sizeof err), 0);
	snprintf(path, sizeof path, "%s/.squash/meta", dir);
	CHECK_INT(symlink("/etc/passwd", path), 0);
	CHECK_INT(squash_image_meta_load(dir, &m, err, sizeof err), -1);
	CHECK_CONTAINS(err, ".squash/meta: a symbolic link (not followed)");
	unlink(path);
	CHECK_INT(mkfifo(path, 0600), 0);
	CHECK_INT(squash_image_meta_load(dir, &m, err, sizeof err), -1);
	CHECK_CONTAINS(err, ".squash/meta: not a regular file");
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	CHECK(ftruncate(fd, SQUASH_META_MAX_BYTES + 1) == 0);
	CHECK_INT(squash_image_meta_load(dir, &m, err, sizeof err), -1);
	CHECK_CONTAINS(err, "65537 bytes, more than the 65536");
	CHECK(ftruncate(fd, 0) == 0);
	CHECK(write(fd, good, sizeof good - 1) == (ssize_t)(sizeof good - 1));
	close(fd);
	CHECK_INT(squash_image_meta_load(dir, &m, err, sizeof err), 1);
	CHECK_STR(m.name, "prgenv-gnu");
	squash_image_meta_free(&m);
	fd = open(path, O_WRONLY | O_TRUNC);
	CHECK(write(fd, "format 1\nbogus\n", 15) == 15);
	close(fd);
	CHECK_INT(squash_image_meta_load(dir, &m, err, sizeof err), -1);
	CHECK_CONTAINS(err, "/.squash/meta: line 2: unknown key 'bogus'");
	unlink(path);
	snprintf(path, sizeof path, "%s/.squash", dir);
	rmdir(path);
	rmdir(dir);
}

int main(void)
{
	test_good();
	test_malformed();
	test_hostile();
	test_env_ops();
	test_load();
	return unit_exit_code();
}
