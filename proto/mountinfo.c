#include "config.h"

#include <string.h>

#include "mountinfo.h"

void squash_mountinfo_unescape(char *s)
{
	char *out = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*out++ = *s++;
		}
	}
	*out = '\0';
}

char *squash_mountinfo_mount_point(char *line)
{
	/* Fields: id parent major:minor root mountpoint options ... */
	char *save = NULL, *field = strtok_r(line, " ", &save);

	for (int i = 1; field && i < 5; i++)
		field = strtok_r(NULL, " ", &save);
	if (field)
		squash_mountinfo_unescape(field);
	return field;
}
