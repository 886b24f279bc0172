/**
 * A container health check (Docker/Swarm HEALTHCHECK): exit 0 when `GET <path>` on 127.0.0.1:<port> answers 200
 * within 3 s. It is bash's /dev/tcp, not a Node process: the engine runs it every few seconds in every task and
 * instance, and a Node start costs tens of ms of CPU each time on the same cores as the services.
 */
export const httpHealthCheck = (port: number, path: string): string[] => [
  'CMD',
  '/bin/bash',
  '-c',
  `exec 3<>/dev/tcp/127.0.0.1/${port} && printf 'GET ${path} HTTP/1.0\\r\\n\\r\\n' >&3 && read -r -t 3 line <&3 && [[ $line == *' 200 '* ]]`,
];

/** A service image's check: its health port (HEALTH_PORT, observe/operator.ts) answers /livez. */
export const healthCheckCommand = (port: number): string[] => httpHealthCheck(port, '/livez');
