/* Which entries of a READDIRPLUS answer squash-reader hands the kernel
 * linked (node id and attributes: the kernel builds an inode and a dentry
 * for each) and which unlinked (node id 0: a name and a type only,
 * unlinked_entry in ops.c).
 *
 * Linking costs the kernel an inode and a dentry per entry (about 1 KiB,
 * charged to the walker) and is wasted on a walk that only needs names
 * and types (find, os.walk): on the HCP set a cold find takes 20-40% less
 * with files unlinked. But a requester that then stats them pays a LOOKUP
 * per file, 2.8 times the walk (docs/performance.md section 16). So in
 * the "auto" mode files go unlinked until the requesting thread looks
 * one up by name; from then on its listings link everything: a stat walk
 * pays the lookups of one directory, a walk that never stats none. What
 * neither mode helps: files listed by one process and stat'ed or opened
 * by another (find | xargs stat, a pool of workers) cost a LOOKUP each,
 * which is why "all" is the default (main.c). */
#ifndef SQUASH_READER_PLUS_POLICY_H
#define SQUASH_READER_PLUS_POLICY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum plus_mode {
	PLUS_ALL,  /* every entry linked */
	PLUS_DIRS, /* directories only */
	PLUS_AUTO, /* directories only, everything for a thread that stats */
};

/* Threads seen looking files up, by pid hashed; a slot taken over by
 * another pid only costs that thread one directory's lookups again. */
#define PLUS_STATTERS 64

struct plus_policy {
	enum plus_mode mode;
	_Atomic uint32_t statters[PLUS_STATTERS];
};

/* "all", "dirs" or "auto": 0, or -1 for anything else. */
int plus_mode_parse(const char *s, enum plus_mode *mode);

/* A LOOKUP by pid found a file (not a directory). */
void plus_note_file_lookup(struct plus_policy *p, uint32_t pid);

/* Whether a listing for pid links its files. */
bool plus_links_files(struct plus_policy *p, uint32_t pid);

#endif
