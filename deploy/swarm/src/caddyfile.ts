import { STACK } from './stack.ts';

/**
 * The edge's Caddyfile: every gateway task (DNS, refreshed each second). Only a request that reached no gateway
 * (a dial error) is tried on another: Caddy would also retry a GET that a dying gateway had already counted, and
 * the user would pay for it twice (lb_retry_match with a method nobody uses turns that off).
 */
export const caddyfile = (): string => `{
\tadmin off
\tauto_https off
}
:8080 {
\treverse_proxy {
\t\tdynamic a {
\t\t\tname tasks.${STACK}-gateway
\t\t\tport 8080
\t\t\trefresh 1s
\t\t}
\t\tlb_policy round_robin
\t\tlb_try_duration 5s
\t\tlb_try_interval 100ms
\t\tlb_retry_match {
\t\t\tmethod NONE
\t\t}
\t\tfail_duration 2s
\t}
}
http://127.0.0.1:8081 {
\trespond /healthz "ok" 200
}
`;
