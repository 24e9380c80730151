/* Reading /proc/PID/mountinfo, for both sides: the plugin's step detaches
 * what it copied from the host, squashd checks its mount points, looks
 * for other namespaces' copies of its mounts and tells which file system
 * serves an image. One parser, exactly as proc(5) defines a line:
 *
 *   36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
 *
 * fields of any length separated by single spaces, optional fields up to
 * a lone "-", and the kernel's \ooo escapes (space, tab, newline,
 * backslash) in the root, the mount point, the type and the source. */
#ifndef SQUASH_MOUNTINFO_H
#define SQUASH_MOUNTINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One line, parsed in place: the strings point into it, root, mount
 * point, fstype and source unescaped. */
struct squash_mount {
	uint64_t id, parent;
	unsigned major, minor;
	char *root, *mount_point, *mount_options;
	char *optional; /* the optional fields as written ("" when none) */
	char *fstype, *source, *super_options;
};

/* Parses one line (its trailing newline, if any, is cut off). Returns 0,
 * or -1 when it is not a line as proc(5) defines it: a field missing or
 * empty where the kernel never writes one empty, no lone "-", more than
 * three fields after it, a number that is not one. Splits line. */
int squash_mountinfo_parse(char *line, struct squash_mount *m);

/* The same for the line of text at line (up to its newline or the end),
 * in a copy of its own: *copy gets it, to be freed (NULL when out of
 * memory). For callers that keep the text whole. */
int squash_mountinfo_parse_copy(const char *line, char **copy, struct squash_mount *m);

/* The line after line in a text, NULL after the last. */
const char *squash_mountinfo_next_line(const char *line);

/* The mount point (field 5) of one mountinfo line, unescaped in place;
 * NULL when the line does not parse. Splits line. */
char *squash_mountinfo_mount_point(char *line);

/* Undoes mountinfo's \ooo escapes in place. */
void squash_mountinfo_unescape(char *s);

/* The whole of one mountinfo file, every line parsed. */
struct squash_mount_table {
	char *text;
	struct squash_mount *mounts;
	size_t count;
};

/* mountinfo texts larger than this are refused, not read in part: the
 * kernel writes about 150 bytes a mount. */
#define SQUASH_MOUNTINFO_MAX (64u << 20)

/* Reads and parses path (e.g. /proc/self/mountinfo). Returns 0, or -1
 * with why ("cannot read ...", "line N of ... does not parse") when it
 * cannot be read whole or a line does not parse. */
int squash_mount_table_read(const char *path, struct squash_mount_table *t, char *why, size_t whylen);

/* The same from text (taken over: freed with the table). Returns 0, or
 * the 1-based number of the first line that does not parse, or -1 when
 * out of memory (text freed then too). */
long squash_mount_table_parse(char *text, struct squash_mount_table *t);

void squash_mount_table_free(struct squash_mount_table *t);

/* The mount with this id, or NULL. */
const struct squash_mount *squash_mount_table_by_id(const struct squash_mount_table *t, uint64_t id);

/* The length of the longest mount point that is path or a parent of it
 * (by whole components), 0 when none is (path not absolute). Every mount
 * with that mount point is the one path lies on or lies under it. */
size_t squash_mount_table_longest_prefix(const struct squash_mount_table *t, const char *path);

/* Whether mount point mp is path or a parent of it, by whole components. */
bool squash_mount_point_covers(const char *mp, const char *path);

/* The value of option name (after "name=") in a comma-separated option
 * list, by whole items; NULL when absent. *count gets how many items
 * name it (several: the caller decides), when count is not NULL. Writes
 * the value's length to *len. */
const char *squash_mount_option(const char *options, const char *name, size_t *len, int *count);

/* Whether the list holds word as a whole item. */
bool squash_mount_option_flag(const char *options, const char *word);

#endif
