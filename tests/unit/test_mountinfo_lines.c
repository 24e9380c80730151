/* mountinfo lines parsed exactly as proc(5) defines them
 * (proto/mountinfo.c): fields of any length, optional fields up to the
 * lone "-", \ooo escapes; crafted lines that shifted fixed-width parsing
 * (issue 37) and lines that are not mountinfo at all. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "mountinfo.h"
#include "unit.h"

static int parse(const char *text, struct squash_mount *m, char *buf, size_t len)
{
	snprintf(buf, len, "%s", text);
	return squash_mountinfo_parse(buf, m);
}

static void plain_lines(void)
{
	char buf[1024];
	struct squash_mount m;

	CHECK_INT(parse("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n", &m,
			buf, sizeof(buf)), 0);
	CHECK_INT(m.id, 36);
	CHECK_INT(m.parent, 35);
	CHECK_INT(m.major, 98);
	CHECK_INT(m.minor, 0);
	CHECK_STR(m.root, "/mnt1");
	CHECK_STR(m.mount_point, "/mnt2");
	CHECK_STR(m.mount_options, "rw,noatime");
	CHECK_STR(m.optional, "master:1");
	CHECK_STR(m.fstype, "ext3");
	CHECK_STR(m.source, "/dev/root");
	CHECK_STR(m.super_options, "rw,errors=continue");

	/* No optional field; several. */
	CHECK_INT(parse("1 0 0:1 / / rw - tmpfs none rw", &m, buf, sizeof(buf)), 0);
	CHECK_STR(m.optional, "");
	CHECK_STR(m.fstype, "tmpfs");
	CHECK_INT(parse("1 0 0:1 / / rw shared:4 master:2 propagate_from:2 unbindable - tmpfs none rw", &m, buf,
			sizeof(buf)), 0);
	CHECK_STR(m.optional, "shared:4 master:2 propagate_from:2 unbindable");
	CHECK_STR(m.source, "none");
	/* A "-" where the root or mount point is: still positional. */
	CHECK_INT(parse("1 0 0:1 - - rw - tmpfs - rw", &m, buf, sizeof(buf)), 0);
	CHECK_STR(m.mount_point, "-");
	CHECK_STR(m.source, "-");
	/* An empty source (the kernel writes what it was given). */
	CHECK_INT(parse("1 0 0:1 / /m rw - fuse  rw,user_id=0", &m, buf, sizeof(buf)), 0);
	CHECK_STR(m.source, "");
	CHECK_STR(m.super_options, "rw,user_id=0");
}

/* The source and subtype are a user's (fusermount3 fsname=, subtype=):
 * as long as they like, and looking like options. */
static void long_and_crafted_fields(void)
{
	char buf[4096];
	struct squash_mount m;

	CHECK_INT(parse("90 29 0:55 / /home/u/f rw,nosuid,nodev - fuse.x xxxxxxxxxxxxxxxxxxxxxallow_other "
			"rw,user_id=1001,group_id=1001", &m, buf, sizeof(buf)), 0);
	CHECK_STR(m.source, "xxxxxxxxxxxxxxxxxxxxxallow_other");
	CHECK_STR(m.super_options, "rw,user_id=1001,group_id=1001");
	CHECK(!squash_mount_option_flag(m.super_options, "allow_other"));

	CHECK_INT(parse("90 29 0:55 / /home/u/f rw - fuse.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa "
			"rw,user_id=0,allow_other rw,user_id=1001,group_id=1001", &m, buf, sizeof(buf)), 0);
	CHECK_STR(m.source, "rw,user_id=0,allow_other");
	CHECK_STR(m.super_options, "rw,user_id=1001,group_id=1001");

	/* Spaces in source and mount point come as \040: one field each. */
	CHECK_INT(parse("90 29 0:55 /a\\040b /home/u/my\\040mnt\\040-\\040fuse rw - fuse my\\040src\\040rw,allow_other "
			"rw,user_id=1001,group_id=1001", &m, buf, sizeof(buf)), 0);
	CHECK_STR(m.root, "/a b");
	CHECK_STR(m.mount_point, "/home/u/my mnt - fuse");
	CHECK_STR(m.source, "my src rw,allow_other");
	CHECK_STR(m.super_options, "rw,user_id=1001,group_id=1001");
	/* Tab, newline, backslash. */
	CHECK_INT(parse("2 1 0:3 / /a\\011b\\012c\\134d rw - tmpfs none rw", &m, buf, sizeof(buf)), 0);
	CHECK_STR(m.mount_point, "/a\tb\nc\\d");
	char mp[] = "7 1 0:3 / /x\\040y rw - tmpfs none rw";
	CHECK_STR(squash_mountinfo_mount_point(mp), "/x y");
}

static void not_mountinfo(void)
{
	char buf[1024];
	struct squash_mount m;
	const char *bad[] = {
		"",
		"garbage",
		"1 0 0:1 / / rw",			/* no separator */
		"1 0 0:1 / / rw shared:1",		/* no separator */
		"1 0 0:1 / / rw - tmpfs",		/* no source */
		"1 0 0:1 / / rw - tmpfs none",		/* no super options */
		"1 0 0:1 / / rw - tmpfs none ",		/* empty super options */
		"1 0 0:1 / / rw - ",			/* nothing after it */
		"1 0 0:1 / /  rw - tmpfs none rw",	/* an empty field */
		"1 0 0:1 / / rw  - tmpfs none rw",	/* an empty optional field */
		"1 0 0:1 / / rw -  none rw",		/* an empty type */
		"x 0 0:1 / / rw - tmpfs none rw",	/* not numbers */
		"1 0 0-1 / / rw - tmpfs none rw",
		"1 0 0: / / rw - tmpfs none rw",
		"-1 0 0:1 / / rw - tmpfs none rw",
		"99999999999999999999999 0 0:1 / / rw - tmpfs none rw", /* too large */
		"1 0 4294967296:1 / / rw - tmpfs none rw",
		"1 0 0:1 / /",
		NULL,
	};

	for (int i = 0; bad[i]; i++) {
		int rc = parse(bad[i], &m, buf, sizeof(buf));
		if (rc != -1)
			fprintf(stderr, "parsed: \"%s\"\n", bad[i]);
		CHECK_INT(rc, -1);
	}
	char shifted[] = "1 0 0:1 / /";
	CHECK(squash_mountinfo_mount_point(shifted) == NULL);
}

/* A line of a few MiB (an overlay of many layers): parsed whole. */
static void huge_line(void)
{
	size_t n = 4u << 20;
	char *line = malloc(n + 128), *text;
	struct squash_mount m;
	struct squash_mount_table t;

	if (!line)
		return;
	strcpy(line, "5 1 0:9 / /o rw - overlay overlay rw,lowerdir=/");
	size_t at = strlen(line);
	memset(line + at, 'a', n);
	strcpy(line + at + n, ",upperdir=/u\n");
	text = strdup(line);
	CHECK_INT(squash_mountinfo_parse(line, &m), 0);
	CHECK_INT(strlen(m.super_options), strlen("rw,lowerdir=/") + n + strlen(",upperdir=/u"));
	/* In a table, and a table with a bad line in the middle. */
	CHECK_INT(squash_mount_table_parse(text, &t), 0);
	CHECK_INT(t.count, 1);
	squash_mount_table_free(&t);
	CHECK_INT(squash_mount_table_parse(strdup("1 0 0:1 / / rw - ext4 /dev/sda rw\n2 1 0:2 / /x rw\n"
						  "3 1 0:3 / /y rw - tmpfs none rw\n"), &t), 2);
	squash_mount_table_free(&t);
	free(line);
}

static void tables_and_options(void)
{
	struct squash_mount_table t;
	const char *v;
	size_t len;
	int count;

	CHECK_INT(squash_mount_table_parse(strdup("1 0 8:1 / / rw - ext4 /dev/sda rw\n"
						  "2 1 0:2 / /home rw - ext4 /dev/sdb rw\n"
						  "3 2 0:3 / /home/u rw - tmpfs none rw\n"
						  "4 2 0:4 / /home/u rw - tmpfs none rw\n"), &t), 0);
	CHECK_INT(t.count, 4);
	CHECK(squash_mount_table_by_id(&t, 3) == &t.mounts[2]);
	CHECK(squash_mount_table_by_id(&t, 9) == NULL);
	CHECK_INT(squash_mount_table_longest_prefix(&t, "/home/u/x"), strlen("/home/u"));
	CHECK_INT(squash_mount_table_longest_prefix(&t, "/home/user"), strlen("/home"));
	CHECK_INT(squash_mount_table_longest_prefix(&t, "/home"), strlen("/home"));
	CHECK_INT(squash_mount_table_longest_prefix(&t, "/etc"), 1);
	CHECK_INT(squash_mount_table_longest_prefix(&t, "etc"), 0);
	squash_mount_table_free(&t);

	v = squash_mount_option("rw,user_id=10,xuser_id=0,user_id=20", "user_id", &len, &count);
	CHECK(v && len == 2 && !strncmp(v, "10", 2));
	CHECK_INT(count, 2);
	CHECK(squash_mount_option("rw,user_id", "user_id", &len, &count) == NULL);
	CHECK(squash_mount_option_flag("rw,allow_other", "allow_other"));
	CHECK(!squash_mount_option_flag("rw,allow_others,xallow_other", "allow_other"));

	struct squash_mount_table empty;
	char why[256];
	CHECK_INT(squash_mount_table_read("/nonexistent/mountinfo", &empty, why, sizeof(why)), -1);
	CHECK_CONTAINS(why, "cannot read /nonexistent/mountinfo");
	CHECK_INT(squash_mount_table_read("/proc/self/mountinfo", &empty, why, sizeof(why)), 0);
	CHECK(empty.count > 0);
	squash_mount_table_free(&empty);
}

int main(void)
{
	plain_lines();
	long_and_crafted_fields();
	not_mountinfo();
	huge_line();
	tables_and_options();
	return unit_exit_code();
}
