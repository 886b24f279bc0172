/**
 * The health check command of a service image (Docker/Swarm HEALTHCHECK): exit 0 when the service's
 * health port (HEALTH_PORT, observe/operator.ts) answers /livez with 200 within 3 s.
 */
export const healthCheckCommand = (port: number): string[] => [
  'CMD',
  '/usr/local/bin/node',
  '-e',
  `fetch('http://127.0.0.1:${port}/livez',{signal:AbortSignal.timeout(3000)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))`,
];
