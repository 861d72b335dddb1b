#!/bin/bash
# healthcheck.sh PORT — exit 0 when the admin API on 127.0.0.1:PORT says the broker is ready
# (GET /v1/status/ready answers 200). bash's /dev/tcp: no curl in the image.
set -eu
port=${1:-9644}
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'GET /v1/status/ready HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
read -r -t 2 _ code _ <&3
[ "$code" = 200 ]
