CREATE TABLE "abuse_reports" (
	"id" text PRIMARY KEY NOT NULL,
	"room" text NOT NULL,
	"message_id" integer,
	"reason" text NOT NULL,
	"reporter" text NOT NULL,
	"created_at" text NOT NULL,
	"status" text NOT NULL,
	"resolved_at" text,
	"resolution" text
);
--> statement-breakpoint
CREATE TABLE "admin_alerts" (
	"id" text PRIMARY KEY NOT NULL,
	"room" text NOT NULL,
	"kind" text NOT NULL,
	"subject" text NOT NULL,
	"summary" text NOT NULL,
	"detail" text NOT NULL,
	"created_at" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "admin_audit" (
	"id" text PRIMARY KEY NOT NULL,
	"at" text NOT NULL,
	"action" text NOT NULL,
	"room" text,
	"report_id" text,
	"reason" text,
	"via" text NOT NULL,
	"ip" text NOT NULL,
	"detail" text NOT NULL
);
--> statement-breakpoint
ALTER TABLE "rooms" ADD COLUMN "hidden" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "admin_alerts" ADD CONSTRAINT "admin_alerts_room_rooms_uuid_fk" FOREIGN KEY ("room") REFERENCES "public"."rooms"("uuid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "abuse_reports_status" ON "abuse_reports" USING btree ("status","created_at");--> statement-breakpoint
CREATE INDEX "abuse_reports_room" ON "abuse_reports" USING btree ("room");--> statement-breakpoint
CREATE INDEX "admin_alerts_created" ON "admin_alerts" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "admin_alerts_subject" ON "admin_alerts" USING btree ("room","kind","subject","created_at");--> statement-breakpoint
CREATE INDEX "admin_audit_at" ON "admin_audit" USING btree ("at");--> statement-breakpoint
CREATE INDEX "admin_audit_room" ON "admin_audit" USING btree ("room","at");