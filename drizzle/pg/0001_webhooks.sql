CREATE TABLE "webhook_deliveries" (
	"id" text PRIMARY KEY NOT NULL,
	"webhook_id" text NOT NULL,
	"room" text NOT NULL,
	"seq" integer,
	"event_type" text NOT NULL,
	"payload" text,
	"status" text NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" text NOT NULL,
	"lease_until" text,
	"claim" text,
	"last_status" integer,
	"last_error" text,
	"created_at" text NOT NULL,
	"updated_at" text NOT NULL,
	"delivered_at" text
);
--> statement-breakpoint
CREATE TABLE "webhooks" (
	"id" text PRIMARY KEY NOT NULL,
	"room" text NOT NULL,
	"kind" text NOT NULL,
	"url" text NOT NULL,
	"events" text,
	"format" text NOT NULL,
	"mentioning" text,
	"room_url" text NOT NULL,
	"secret_hash" text NOT NULL,
	"created_at" text NOT NULL,
	"consecutive_dead" integer DEFAULT 0 NOT NULL,
	"disabled_at" text,
	"disabled_reason" text,
	"expiry_alerted_for" text
);
--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_webhook_id_webhooks_id_fk" FOREIGN KEY ("webhook_id") REFERENCES "public"."webhooks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_room_rooms_uuid_fk" FOREIGN KEY ("room") REFERENCES "public"."rooms"("uuid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhooks" ADD CONSTRAINT "webhooks_room_rooms_uuid_fk" FOREIGN KEY ("room") REFERENCES "public"."rooms"("uuid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "webhook_deliveries_due" ON "webhook_deliveries" USING btree ("next_attempt_at") WHERE status IN ('pending', 'retrying');--> statement-breakpoint
CREATE INDEX "webhook_deliveries_webhook" ON "webhook_deliveries" USING btree ("webhook_id","created_at");--> statement-breakpoint
CREATE INDEX "webhooks_room" ON "webhooks" USING btree ("room");