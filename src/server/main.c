/* main.c — strata-server entry point (placeholder until the server core lands). */
#include <stdio.h>

int main(void)
{
    fprintf(stderr, "strata-server: not yet\n");
    return 1;
}
