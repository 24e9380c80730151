#include "config.h"
#include "settings/fuse_conf.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* What fusermount's strip_line leaves of a line: no comment, no blanks
 * around it. */
static char *stripped(char *line)
{
	char *hash = strchr(line, '#'), *end;

	if (hash)
		*hash = '\0';
	while (isspace((unsigned char)*line))
		line++;
	end = line + strlen(line);
	while (end > line && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return line;
}

int fuse_conf_mount_max(const char *path)
{
	char line[256];
	int max = FUSE_CONF_MOUNT_MAX_DEFAULT, value;
	bool whole = true; /* line starts a line of the file */
	FILE *f = fopen(path, "re");

	if (!f)
		return max;
	while (fgets(line, sizeof(line), f)) {
		/* As fusermount: a line longer than its 256-byte buffer is
		 * skipped, all of it, and so is a last line without a
		 * newline. */
		bool ends = strchr(line, '\n') != NULL;
		if (whole && ends && sscanf(stripped(line), "mount_max = %i", &value) == 1)
			max = value;
		whole = ends;
	}
	fclose(f);
	return max;
}
