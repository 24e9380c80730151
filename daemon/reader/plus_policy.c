#include "config.h"

#include "reader/plus_policy.h"

#include <string.h>

int plus_mode_parse(const char *s, enum plus_mode *mode)
{
	static const char *const names[] = { [PLUS_ALL] = "all", [PLUS_DIRS] = "dirs", [PLUS_AUTO] = "auto" };

	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i])) {
			*mode = (enum plus_mode)i;
			return 0;
		}
	return -1;
}

_Static_assert(PLUS_STATTERS == 1 << 6, "slot() takes 6 bits");

static _Atomic uint32_t *slot(struct plus_policy *p, uint32_t pid)
{
	return &p->statters[(pid * 2654435761u) >> 26]; /* 6 bits: PLUS_STATTERS */
}

void plus_note_file_lookup(struct plus_policy *p, uint32_t pid)
{
	if (p->mode == PLUS_AUTO && pid)
		atomic_store_explicit(slot(p, pid), pid, memory_order_relaxed);
}

bool plus_links_files(struct plus_policy *p, uint32_t pid)
{
	switch (p->mode) {
	case PLUS_ALL:
		return true;
	case PLUS_DIRS:
		return false;
	default:
		return pid && atomic_load_explicit(slot(p, pid), memory_order_relaxed) == pid;
	}
}
